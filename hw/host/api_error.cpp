#include "hw/host/api_error.hpp"

namespace epsim::hw {

namespace {

/// Library messages may hold newlines and trailing blanks; the error is one line.
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string repository_relative(const std::string& path) {
  if (path.compare(0, 3, "hw/") == 0) return path;
  const auto at = path.rfind("/hw/");
  return at == std::string::npos ? path : path.substr(at + 1);
}

std::string api_failure_message(const ApiFailure& f) {
  std::string out = repository_relative(f.file) + ":" + std::to_string(f.line) + ": " + f.api + " call " + f.call +
                    " failed: " + f.error_name;
  if (!f.error_text.empty() && f.error_text != f.error_name) out += " (" + f.error_text + ")";
  const std::string detail = one_line(f.detail);
  if (!detail.empty()) out += "; " + detail;
  if (f.asynchronous)
    out += "; this error comes from device work enqueued earlier (a kernel or copy that faulted) and is only "
           "reported at this call: rerun with CUDA_LAUNCH_BLOCKING=1 or under compute-sanitizer to find it";
  return out;
}

}  // namespace epsim::hw
