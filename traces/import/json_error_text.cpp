#include "traces/import/json_error_text.hpp"

namespace epsim {

std::string json_error_reason(const nlohmann::json::parse_error& e) {
  const std::string what = e.what();
  const std::size_t column = what.find("column ");
  if (column != std::string::npos) {
    const std::size_t colon = what.find(": ", column);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  const std::size_t bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

std::string json_error_place(const std::string& text, std::size_t byte) {
  std::size_t line = 1, column = 1;
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

}  // namespace epsim
