#include "sim/core/json_line.hpp"

#include <cstddef>
#include <iterator>
#include <streambuf>
#include <string>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"

namespace epsim {

namespace {

using Traits = std::char_traits<char>;

/// The characters of one line, as an input iterator for nlohmann's parser: first `prefix` (the blanks
/// read while looking for the line's first character), then the stream's, up to the newline, which it
/// leaves unread. `count` tallies the characters handed out, so that a position is known without the
/// text: the 1-based position of the last character read is the count.
class LineChars {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  LineChars() = default;  ///< the line's end
  LineChars(std::streambuf* buf, const std::string* prefix, std::uint64_t* count)
      : buf_(buf), prefix_(prefix), count_(count) {}

  char operator*() const { return at_ < prefix_->size() ? (*prefix_)[at_] : Traits::to_char_type(buf_->sgetc()); }
  LineChars& operator++() {
    if (at_ < prefix_->size()) ++at_;
    else buf_->sbumpc();
    ++*count_;
    return *this;
  }
  LineChars operator++(int) {
    LineChars before = *this;
    ++*this;
    return before;
  }
  bool operator==(const LineChars& other) const { return ended() == other.ended(); }
  bool operator!=(const LineChars& other) const { return !(*this == other); }

 private:
  bool ended() const {
    if (buf_ == nullptr) return true;
    if (at_ < prefix_->size()) return false;
    const Traits::int_type c = buf_->sgetc();
    return Traits::eq_int_type(c, Traits::eof()) || Traits::eq_int_type(c, Traits::to_int_type('\n'));
  }

  std::streambuf* buf_ = nullptr;
  const std::string* prefix_ = nullptr;
  std::size_t at_ = 0;
  std::uint64_t* count_ = nullptr;
};

/// parse_json's place of a position on a single line: its column, 1 for position 0.
std::string column_place(std::uint64_t line, std::uint64_t position) {
  return "line " + std::to_string(line) + ", column " + std::to_string(position == 0 ? 1 : position);
}

}  // namespace

std::optional<nlohmann::json> parse_json_line(std::istream& in, const std::string& file, std::uint64_t line,
                                              JsonListSink* lists, std::uint64_t& bytes) {
  bytes = 0;
  std::streambuf* buf = in.rdbuf();
  if (buf == nullptr) throw InputError(file, "", "read error");
  // The blanks before the first character, kept to hand to the parser: a blank line is skipped, as
  // getline and a test for blanks would, and any other line parses exactly as its whole text would.
  std::string blanks;
  Traits::int_type c = buf->sgetc();
  while (c == ' ' || c == '\t' || c == '\r') {
    blanks.push_back(Traits::to_char_type(c));
    c = buf->snextc();
  }
  const bool at_newline = Traits::eq_int_type(c, Traits::to_int_type('\n'));
  if (at_newline || Traits::eq_int_type(c, Traits::eof())) {
    if (at_newline) buf->sbumpc();
    bytes = blanks.size() + (at_newline ? 1 : 0);
    if (bytes == 0) in.setstate(std::ios::eofbit);
    return std::nullopt;
  }
  nlohmann::json root;
  std::uint64_t count = 0;
  BoundedDom dom(root, file, [&](std::size_t position) { return column_place(line, position); }, lists);
  const bool complete = nlohmann::json::sax_parse(LineChars(buf, &blanks, &count), LineChars(), &dom);
  if (dom.too_deep())
    throw InputError(file, column_place(line, count),
                     "invalid JSON: arrays and objects nested deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels");
  if (!complete) throw InputError(file, column_place(line, count), "invalid JSON");
  const bool newline = Traits::eq_int_type(buf->sgetc(), Traits::to_int_type('\n'));
  if (newline) buf->sbumpc();
  bytes = count + (newline ? 1 : 0);
  return root;
}

}  // namespace epsim
