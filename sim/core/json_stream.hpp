// JSON parsed straight from a stream, without the text in memory: a wide plan is one line of hundreds
// of megabytes, and a calibration run's measured timeline one document of as many, which parse_json
// would hold twice over (the text and its document). Errors, places and limits are parse_json's,
// character for character.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/core/bounded_dom.hpp"

namespace epsim {

/// Parses the next line of `in` (up to its newline, which it consumes, or the stream's end) as one
/// JSON document, line `line` of `file`; `lists`, when given, takes the elements of the top-level
/// arrays it chooses (BoundedDom), which the document returned holds empty. A line of nothing but
/// spaces, tabs and carriage returns gives nullopt; so does the stream's end, where `bytes` is 0.
/// Otherwise `bytes` is the line's length with its newline. Throws parse_json's InputError, placed
/// "line L, column C" within the line.
std::optional<nlohmann::json> parse_json_line(std::istream& in, const std::string& file, std::uint64_t line,
                                              JsonListSink* lists, std::uint64_t& bytes);

/// Parses the rest of `in` as one JSON document, as parse_json(text of the rest, file) would, with
/// `lists` as in parse_json_line.
nlohmann::json parse_json_stream(std::istream& in, const std::string& file, JsonListSink* lists);

}  // namespace epsim
