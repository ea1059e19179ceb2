#include "sim/core/json_input.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "sim/core/input_error.hpp"

namespace epsim {

namespace {

using nlohmann::json;

/// Builds the document like nlohmann's own DOM parser, but stops at the first array or object that
/// would nest deeper than kMaxJsonDepth, and turns every parse error (syntax, number overflow) into
/// an InputError at its position.
class BoundedDom {
 public:
  BoundedDom(json& root, const std::string& text, const std::string& file, std::uint64_t first_line)
      : root_(root), text_(text), file_(file), first_line_(first_line) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    member_ = &(*stack_.back())[k];
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const json::exception& e) {
    std::string reason = e.what();
    // nlohmann's text is "[json.exception.parse_error.101] parse error at line 1, column 4: why";
    // the place is ours, the explanation is its.
    const std::size_t column = reason.find("column ");
    const std::size_t colon = column == std::string::npos ? std::string::npos : reason.find(": ", column);
    if (colon != std::string::npos) {
      reason = reason.substr(colon + 2);
    } else {
      const std::size_t bracket = reason.find("] ");
      if (bracket != std::string::npos) reason = reason.substr(bracket + 2);
    }
    throw InputError(file_, json_text_place(text_, position, first_line_), "invalid JSON: " + reason);
  }

  bool too_deep() const { return too_deep_; }

 private:
  bool put(json&& value) {
    place(std::move(value));
    return true;
  }
  json* place(json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(value));
      return &top.back();
    }
    *member_ = std::move(value);
    return member_;
  }
  bool open(json&& container) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth) {
      too_deep_ = true;
      return false;  // stops the parser
    }
    stack_.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  const std::string& text_;
  const std::string& file_;
  std::uint64_t first_line_;
  std::vector<json*> stack_;  ///< the open arrays and objects, innermost last
  json* member_ = nullptr;    ///< the object member the next value goes to
  bool too_deep_ = false;
};

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
  BoundedDom dom(root, text, file, first_line);
  const bool complete = json::sax_parse(text, &dom);
  if (dom.too_deep())
    throw InputError(file, json_text_place(text, byte_beyond_depth(text, kMaxJsonDepth), first_line),
                     "invalid JSON: arrays and objects nested deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels");
  if (!complete) throw InputError(file, json_text_place(text, text.size(), first_line), "invalid JSON");
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

std::int64_t json_integer(const nlohmann::json& value, std::int64_t lo, std::int64_t hi, const std::string& file,
                          const std::string& place) {
  std::int64_t v = 0;
  if (value.is_number_unsigned()) {
    const std::uint64_t u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi))
      throw InputError(file, place, "value " + std::to_string(u) + " outside " + range_text(lo, hi));
    v = static_cast<std::int64_t>(u);
  } else if (value.is_number_integer()) {
    v = value.get<std::int64_t>();
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d))
      throw InputError(file, place, "expected an integer, found a fraction: " + json_excerpt(value));
    // 2^63 is exactly representable; anything at or beyond it (or below -2^63) cannot be converted.
    constexpr double kTwo63 = 9223372036854775808.0;
    if (d >= kTwo63 || d < -kTwo63)
      throw InputError(file, place, "value " + json_excerpt(value) + " outside " + range_text(lo, hi));
    v = static_cast<std::int64_t>(d);
  } else {
    throw InputError(file, place, "expected an integer, found " + found(value));
  }
  if (v < lo || v > hi) throw InputError(file, place, "value " + std::to_string(v) + " outside " + range_text(lo, hi));
  return v;
}

std::optional<std::int64_t> json_integer_if(const nlohmann::json& value, std::int64_t lo, std::int64_t hi) {
  try {
    return json_integer(value, lo, hi, "", "");
  } catch (const InputError&) {
    return std::nullopt;
  }
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
