// Reading JSON that users and other tools wrote: every reader parses and converts through these, so
// that any defect (syntax, a number too large for a double, nesting too deep, a value of the wrong
// kind or out of range) becomes one InputError naming the file, the place and what was expected, and
// nothing recurses over the input or converts a floating-point value that does not fit.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace epsim {

/// Deepest nesting of arrays and objects a reader accepts. epsim's own files nest at most 4 deep;
/// the limit keeps every later walk over a value (comparisons, dumps, destruction) shallow.
constexpr int kMaxJsonDepth = 64;

/// Parses `text`, one JSON document. `first_line` is the line number of its first line in `file`
/// (a JSON-lines reader parses one line at a time). A syntax error, a number outside the range of a
/// double (1e400), or arrays and objects nested deeper than kMaxJsonDepth raise
/// InputError(file, "line L, column C", "invalid JSON: ...").
nlohmann::json parse_json(const std::string& text, const std::string& file, std::uint64_t first_line = 1);

/// "line L, column C" of the 1-based byte position `byte` of `text` whose first line is `first_line`.
std::string json_text_place(const std::string& text, std::size_t byte, std::uint64_t first_line = 1);

/// A short, bounded description of `value` for error messages: the value itself for a number,
/// true/false/null, a string (cut after 40 characters), and only its kind for an array or an object.
std::string json_excerpt(const nlohmann::json& value);

/// The integer `value` if it is one in [lo, hi]: an integer number, or a floating-point one with no
/// fractional part. Anything else (a fraction, a string, a value out of range) raises
/// InputError(file, place, "expected an integer in [lo, hi], found ..."), checked before any
/// conversion so that no out-of-range floating-point value is ever cast.
std::int64_t json_integer(const nlohmann::json& value, std::int64_t lo, std::int64_t hi, const std::string& file,
                          const std::string& place);

/// The integer `value` if it is one in [lo, hi] (by the rule of json_integer), else nothing, without
/// an exception: for readers that word their own message, and for those that spell a value's place
/// only once it is found wrong (json_integer then gives the message).
std::optional<std::int64_t> json_integer_if(const nlohmann::json& value, std::int64_t lo, std::int64_t hi);

/// The finite number `value` in [lo, hi]; otherwise InputError(file, place, ...).
double json_number(const nlohmann::json& value, double lo, double hi, const std::string& file,
                   const std::string& place);

/// The string `value`; otherwise InputError(file, place, "expected a string, found ...").
std::string json_string(const nlohmann::json& value, const std::string& file, const std::string& place);

/// The boolean `value`; otherwise InputError(file, place, "expected true or false, found ...").
bool json_bool(const nlohmann::json& value, const std::string& file, const std::string& place);

/// `object[key]` when `object` is an object holding `key`; otherwise InputError(file, place, ...)
/// saying which key is missing (or that an object was expected).
const nlohmann::json& json_member(const nlohmann::json& object, const char* key, const std::string& file,
                                  const std::string& place);

/// `value` when it is an array; otherwise InputError(file, place, "expected an array, found ...").
const nlohmann::json& json_array(const nlohmann::json& value, const std::string& file, const std::string& place);

}  // namespace epsim
