#include "sim/core/output_lock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/input_error.hpp"
#include "sim/core/signal_cleanup.hpp"

namespace fs = std::filesystem;

namespace epsim {

std::string OutputLock::lock_path(const std::string& target) {
  const fs::path t(target);
  return (t.parent_path() / ("." + t.filename().string() + ".epsim-lock")).string();
}

OutputLock::OutputLock(const std::string& target, const std::string& shown_as) : path_(lock_path(target)) {
  // The holder removes the file when done, so a file opened just before that removal may be locked
  // successfully yet no longer be the lock: after locking, check that the path still names the same
  // file, and start over if not.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int err = errno;
      throw InputError(shown_as, "", "cannot create the lock file '" + path_ + "': " + std::strerror(err));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        throw InputError(shown_as, "", "another epsim process is writing this output right now; wait for it to "
                                       "finish or choose another output");
      throw InputError(shown_as, "", "cannot lock '" + path_ + "': " + std::strerror(err));
    }
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      fd_ = fd;
      // Registered only once it is ours: a signal must never remove another process's lock file.
      try {
        signal_slot_ = SignalCleanup::add_file(path_);
      } catch (...) {
        ::unlink(path_.c_str());
        ::close(fd_);
        throw;
      }
      return;
    }
    ::close(fd);
  }
  throw InputError(shown_as, "", "cannot take the lock '" + path_ + "': it keeps being replaced");
}

OutputLock::~OutputLock() {
  ::unlink(path_.c_str());
  ::close(fd_);
  SignalCleanup::release(signal_slot_);
}

}  // namespace epsim
