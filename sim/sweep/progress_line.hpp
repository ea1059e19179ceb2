// The sweep's progress on stderr: points done of the total, the rate and the time left. On a terminal
// one line rewritten in place; otherwise (--progress into a file or a pipe) one line per finished
// point, with that point's own time, so that a log shows where the time went.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <ostream>
#include <string>

namespace epsim {

class ProgressLine {
 public:
  /// `done` points were already there, `todo` are to be computed, of `total` in the sweep.
  ProgressLine(std::ostream& out, bool terminal, std::size_t done, std::size_t todo, std::size_t total);
  /// One point finished after `seconds` of its own (called from any thread).
  void finished(const std::string& point, double seconds);
  /// Ends the line on a terminal.
  void close();

 private:
  std::ostream& out_;
  bool terminal_;
  std::size_t done_, todo_, total_, computed_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  bool open_ = false;
};

/// "1h02m", "3m07s", "12s".
std::string duration_text(double seconds);

}  // namespace epsim
