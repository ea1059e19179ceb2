#include "sim/core/json_input.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "sim/core/bounded_dom.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {

namespace {

using nlohmann::json;

/// 1-based byte of the first '[' or '{' that opens nesting level `depth` + 1, outside strings; the
/// text before it parsed, so it is valid JSON up to there.
std::size_t byte_beyond_depth(const std::string& text, int depth) {
  int level = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++level > depth) return i + 1;
    } else if (c == ']' || c == '}') {
      --level;
    }
  }
  return text.size();
}

std::string kind_of(const json& value) {
  switch (value.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::null: return "null";
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

/// What was found instead, for "expected X, found Y".
std::string found(const json& value) {
  if (value.is_string()) return "the string " + json_excerpt(value);
  if (value.is_boolean()) return json_excerpt(value);
  return kind_of(value);
}

std::string range_text(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

}  // namespace

nlohmann::json parse_json(const std::string& text, const std::string& file, std::uint64_t first_line) {
  json root;
  BoundedDom dom(root, file, [&](std::size_t byte) { return json_text_place(text, byte, first_line); });
  const bool complete = json::sax_parse(text, &dom);
  if (dom.too_deep())
    throw InputError(file, json_text_place(text, byte_beyond_depth(text, kMaxJsonDepth), first_line),
                     "invalid JSON: arrays and objects nested deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels");
  if (!complete) throw InputError(file, json_text_place(text, text.size(), first_line), "invalid JSON");
  // The parser takes a NUL character for the end of the text, so that one after the value would
  // leave the rest unread; one inside the value is an error of its own.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
    throw InputError(file, json_text_place(text, nul + 1, first_line), "invalid JSON: a NUL character after the value");
  return root;
}

std::string json_text_place(const std::string& text, std::size_t byte, std::uint64_t first_line) {
  std::uint64_t line = first_line, column = 1;
  const std::size_t end = byte == 0 ? 0 : byte - 1;
  for (std::size_t i = 0; i < end && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

std::string json_excerpt(const nlohmann::json& value) {
  constexpr std::size_t kMaxChars = 40;
  switch (value.type()) {
    case json::value_t::object:
    case json::value_t::array:
    case json::value_t::binary:
    case json::value_t::discarded: return kind_of(value);
    case json::value_t::string: {
      const std::string& s = value.get_ref<const std::string&>();
      const bool cut = s.size() > kMaxChars;
      // `replace` keeps a string whose cut fell inside a UTF-8 sequence printable.
      return json(cut ? s.substr(0, kMaxChars) : s).dump(-1, ' ', false, json::error_handler_t::replace) +
             (cut ? "..." : "");
    }
    default: return value.dump();
  }
}

namespace {

/// 2^63 is exactly representable; a float at or beyond it (or below -2^63) cannot be converted.
constexpr double kTwo63 = 9223372036854775808.0;
bool beyond_int64(double d) { return d >= kTwo63 || d < -kTwo63; }

/// What json_integer finds in a value: the one rule both json_integer and json_integer_if apply.
enum class IntegerFound { in_range, outside, fraction, not_a_number };

/// Checked before any conversion, so that no out-of-range floating-point value is ever cast; `v` is
/// set when in_range, and for an integer outside [lo, hi] below 2^63.
IntegerFound find_integer(const nlohmann::json& value, std::int64_t lo, std::int64_t hi, std::int64_t& v) {
  if (value.is_number_unsigned()) {
    const std::uint64_t u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) return IntegerFound::outside;
    v = static_cast<std::int64_t>(u);
  } else if (value.is_number_integer()) {
    v = value.get<std::int64_t>();
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) return IntegerFound::fraction;
    if (beyond_int64(d)) return IntegerFound::outside;
    v = static_cast<std::int64_t>(d);
  } else {
    return IntegerFound::not_a_number;
  }
  return v < lo || v > hi ? IntegerFound::outside : IntegerFound::in_range;
}

}  // namespace

std::int64_t json_integer(const nlohmann::json& value, std::int64_t lo, std::int64_t hi, const std::string& file,
                          const std::string& place) {
  std::int64_t v = 0;
  switch (find_integer(value, lo, hi, v)) {
    case IntegerFound::in_range: return v;
    case IntegerFound::fraction:
      throw InputError(file, place, "expected an integer, found a fraction: " + json_excerpt(value));
    case IntegerFound::not_a_number:
      throw InputError(file, place, "expected an integer, found " + found(value));
    case IntegerFound::outside: break;
  }
  // The value as converted, or as written where it could not be: an unsigned beyond 2^63 - 1, a
  // float at or beyond 2^63 in magnitude.
  std::string shown;
  if (value.is_number_unsigned()) {
    shown = std::to_string(value.get<std::uint64_t>());
  } else if (value.is_number_float() && beyond_int64(value.get<double>())) {
    shown = json_excerpt(value);
  } else {
    shown = std::to_string(v);
  }
  throw InputError(file, place, "value " + shown + " outside " + range_text(lo, hi));
}

std::optional<std::int64_t> json_integer_if(const nlohmann::json& value, std::int64_t lo, std::int64_t hi) {
  // No message is built: the plan and measured-timeline readers call this first for each of their
  // millions of values, and json_integer only for a defect.
  std::int64_t v = 0;
  if (find_integer(value, lo, hi, v) != IntegerFound::in_range) return std::nullopt;
  return v;
}

double json_number(const nlohmann::json& value, double lo, double hi, const std::string& file,
                   const std::string& place) {
  if (!value.is_number())
    throw InputError(file, place, "expected a number, found " + found(value));
  const double d = value.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    std::ostringstream range;
    range << "[" << lo << ", " << hi << "]";
    throw InputError(file, place, "value " + json_excerpt(value) + " outside " + range.str());
  }
  return d;
}

std::string json_string(const nlohmann::json& value, const std::string& file, const std::string& place) {
  if (!value.is_string())
    throw InputError(file, place, "expected a string, found " + found(value));
  return value.get<std::string>();
}

bool json_bool(const nlohmann::json& value, const std::string& file, const std::string& place) {
  if (!value.is_boolean()) throw InputError(file, place, "expected true or false, found " + found(value));
  return value.get<bool>();
}

const nlohmann::json& json_member(const nlohmann::json& object, const char* key, const std::string& file,
                                  const std::string& place) {
  if (!object.is_object()) throw InputError(file, place, "expected an object, found " + found(object));
  const auto it = object.find(key);
  if (it == object.end()) throw InputError(file, place, std::string("missing key '") + key + "'");
  return *it;
}

const nlohmann::json& json_array(const nlohmann::json& value, const std::string& file, const std::string& place) {
  if (!value.is_array()) throw InputError(file, place, "expected an array, found " + found(value));
  return value;
}

}  // namespace epsim
