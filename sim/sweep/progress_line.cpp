#include "sim/sweep/progress_line.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace epsim {

std::string duration_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

ProgressLine::ProgressLine(std::ostream& out, bool terminal, std::size_t done, std::size_t todo, std::size_t total)
    : out_(out), terminal_(terminal), done_(done), todo_(todo), total_(total), start_(std::chrono::steady_clock::now()) {}

void ProgressLine::finished(const std::string& point, double seconds) {
  std::lock_guard<std::mutex> guard(mutex_);
  ++computed_;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(computed_) / elapsed : 0;
  const std::size_t left = todo_ - computed_;
  char rate_text[32];
  std::snprintf(rate_text, sizeof rate_text, "%.2f", rate);
  std::string line = "epsim sweep: " + std::to_string(done_ + computed_) + "/" + std::to_string(total_) +
                     " points, " + rate_text + " points/s, " +
                     (left == 0 ? std::string("done") : "about " + duration_text(rate > 0 ? left / rate : 0) + " left");
  if (terminal_) {
    out_ << "\r" << line << "\x1b[K" << std::flush;
    open_ = true;
  } else {
    char own[32];
    std::snprintf(own, sizeof own, "%.2f", seconds);
    out_ << line << " (" << point << ": " << own << " s)\n" << std::flush;
  }
}

void ProgressLine::close() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (open_) out_ << "\n" << std::flush;
  open_ = false;
}

}  // namespace epsim
