#include "sim/core/json_stream.hpp"

#include <cstddef>
#include <iterator>
#include <streambuf>
#include <string>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"

namespace epsim {

namespace {

using Traits = std::char_traits<char>;

/// What the parser was handed so far, kept so that a position is placed without the text: the
/// characters handed out, and the newlines among them.
struct Tally {
  std::uint64_t count = 0;
  /// Newlines among the first `count`, `count - 1` and `count - 2` characters, and where the line
  /// after the last of them starts: a position the parser reports is at most two characters behind
  /// the last one it was handed (a character it put back, then the end of the input).
  std::uint64_t lines[3] = {0, 0, 0};
  std::uint64_t line_start[3] = {0, 0, 0};
  char last = 0;  ///< the last character handed out

  void hand_out(char c) {
    last = c;
    for (int k = 2; k > 0; --k) {
      lines[k] = lines[k - 1];
      line_start[k] = line_start[k - 1];
    }
    ++count;
    if (c == '\n') {
      ++lines[0];
      line_start[0] = count;
    }
  }
  /// parse_json's place (json_text_place) of the 1-based `position`: the line and column of the
  /// character before it, the text's first line being `first_line`.
  std::string place(std::uint64_t position, std::uint64_t first_line) const {
    const std::uint64_t before = position == 0 ? 0 : position - 1;  // characters ahead of the one placed
    const std::uint64_t k = before >= count ? 0 : std::min<std::uint64_t>(2, count - before);
    return "line " + std::to_string(first_line + lines[k]) + ", column " + std::to_string(before - line_start[k] + 1);
  }
};

/// Characters for nlohmann's parser, as an input iterator: first `prefix` (blanks read while looking
/// for a line's first character), then the stream's, up to the stream's end or, for a line, up to
/// its newline, which it leaves unread.
class StreamChars {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  StreamChars() = default;  ///< the end
  StreamChars(std::streambuf* buf, const std::string* prefix, bool one_line, Tally* tally)
      : buf_(buf), prefix_(prefix), one_line_(one_line), tally_(tally) {}

  char operator*() const { return at_ < prefix_->size() ? (*prefix_)[at_] : Traits::to_char_type(buf_->sgetc()); }
  StreamChars& operator++() {
    tally_->hand_out(**this);
    if (at_ < prefix_->size()) ++at_;
    else buf_->sbumpc();
    return *this;
  }
  StreamChars operator++(int) {
    StreamChars before = *this;
    ++*this;
    return before;
  }
  bool operator==(const StreamChars& other) const { return ended() == other.ended(); }
  bool operator!=(const StreamChars& other) const { return !(*this == other); }

 private:
  bool ended() const {
    if (buf_ == nullptr) return true;
    if (at_ < prefix_->size()) return false;
    const Traits::int_type c = buf_->sgetc();
    return Traits::eq_int_type(c, Traits::eof()) || (one_line_ && Traits::eq_int_type(c, Traits::to_int_type('\n')));
  }

  std::streambuf* buf_ = nullptr;
  const std::string* prefix_ = nullptr;
  std::size_t at_ = 0;
  bool one_line_ = false;
  Tally* tally_ = nullptr;
};

/// Parses what `chars` hands out as one document into `root`, with parse_json's errors and limits.
void parse_chars(StreamChars chars, Tally& tally, const std::string& file, std::uint64_t first_line,
                 JsonListSink* lists, nlohmann::json& root) {
  BoundedDom dom(root, file, [&](std::size_t position) { return tally.place(position, first_line); }, lists);
  const bool complete = nlohmann::json::sax_parse(chars, StreamChars(), &dom);
  // The parser stops at the bracket that opens the level too deep, the last character handed out.
  if (dom.too_deep())
    throw InputError(file, tally.place(tally.count, first_line),
                     "invalid JSON: arrays and objects nested deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels");
  if (!complete) throw InputError(file, tally.place(tally.count, first_line), "invalid JSON");
  // The parser takes a NUL character for the end of the text: one after the value would leave the
  // rest of it unread (parse_json's rule).
  if (tally.count > 0 && tally.last == '\0')
    throw InputError(file, tally.place(tally.count, first_line), "invalid JSON: a NUL character after the value");
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
  Tally tally;
  parse_chars(StreamChars(buf, &blanks, true, &tally), tally, file, line, lists, root);
  const bool newline = Traits::eq_int_type(buf->sgetc(), Traits::to_int_type('\n'));
  if (newline) buf->sbumpc();
  bytes = tally.count + (newline ? 1 : 0);
  return root;
}

nlohmann::json parse_json_stream(std::istream& in, const std::string& file, JsonListSink* lists) {
  std::streambuf* buf = in.rdbuf();
  if (buf == nullptr) throw InputError(file, "", "read error");
  const std::string none;
  nlohmann::json root;
  Tally tally;
  parse_chars(StreamChars(buf, &none, false, &tally), tally, file, 1, lists, root);
  return root;
}

}  // namespace epsim
