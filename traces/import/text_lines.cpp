#include "traces/import/text_lines.hpp"

#include <cerrno>
#include <cstring>

#include "sim/core/input_error.hpp"

namespace epsim {

TextLines::TextLines(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno));
}

bool TextLines::next(std::string& line) {
  if (!std::getline(in_, line)) {
    if (in_.bad()) throw InputError(path_, "after " + place(), "read error");
    return false;
  }
  ++line_no_;
  line_offset_ = next_offset_;
  next_offset_ += line.size() + (in_.eof() ? 0 : 1);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

bool TextLines::read_at(std::uint64_t offset, std::string& line) {
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  if (!in_ || !std::getline(in_, line)) {
    if (in_.bad()) throw InputError(path_, "byte " + std::to_string(offset), "read error");
    return false;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

void TextLines::fail(const std::string& message) const { throw InputError(path_, place(), message); }

}  // namespace epsim
