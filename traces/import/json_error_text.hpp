// Turns nlohmann::json parse errors into the project's "FILE:line N, column C: message" form.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace epsim {

/// The parser's own explanation without its "[json.exception...] parse error at ...:" prefix.
std::string json_error_reason(const nlohmann::json::parse_error& e);

/// "line L, column C" of the 1-based byte position `byte` within `text`.
std::string json_error_place(const std::string& text, std::size_t byte);

}  // namespace epsim
