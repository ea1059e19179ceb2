#include "sim/core/rename_into_place.hpp"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

namespace epsim {

int rename_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // No RENAME_NOREPLACE on this file system: link(2) refuses an existing target atomically too, but
  // works for files only. A folder falls back to checking first (a window only another writer that
  // ignores epsim's lock could use).
  if (::link(from.c_str(), to.c_str()) == 0) return ::unlink(from.c_str()) == 0 ? 0 : errno;
  if (errno == EEXIST) return EEXIST;
  if (::access(to.c_str(), F_OK) == 0) return EEXIST;
  return std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

int rename_exchange(const std::string& a, const std::string& b, const std::string& spare) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (std::rename(b.c_str(), spare.c_str()) != 0) return errno;
  if (std::rename(a.c_str(), b.c_str()) != 0) {
    const int err = errno;
    std::rename(spare.c_str(), b.c_str());  // put the old one back
    return err;
  }
  return std::rename(spare.c_str(), a.c_str()) == 0 ? 0 : errno;
}

}  // namespace epsim
