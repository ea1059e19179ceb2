// An exclusive claim on one output path, so that two epsim processes never write the same output
// folder at once. The lock is flock(2) on a hidden file beside the target (".NAME.epsim-lock"): the
// kernel releases it when the holder exits, however it exits, so a killed run never blocks the next.
// A second process is refused at once with a message naming the output, rather than waiting.
#pragma once

#include <string>

namespace epsim {

class OutputLock {
 public:
  /// `target` is the absolute output path; errors name `shown_as`.
  OutputLock(const std::string& target, const std::string& shown_as);
  /// Removes the lock file, then releases the lock.
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  /// The lock file's name for `target` (tests look for leftovers).
  static std::string lock_path(const std::string& target);

 private:
  std::string path_;
  int fd_ = -1;
  int signal_slot_ = -1;
};

}  // namespace epsim
