// One output file (a trace, a calibrated hardware file, a measurement file) that appears whole or not
// at all. It is written under a hidden temporary name beside the target, created exclusively so no
// file of the user's is ever truncated, checked on every write, synced, and renamed into place only by
// commit(). Replacing an existing file needs `replace` (the user's --force); without it, a file that
// appears at the target meanwhile is never overwritten. Missing parent folders are created, and
// removed again if the file is not committed. A signal removes the temporary file (SignalCleanup).
#pragma once

#include <ostream>
#include <string>

#include "sim/core/checked_file.hpp"
#include "sim/core/created_folders.hpp"

namespace epsim {

class AtomicFile {
 public:
  /// Throws InputError if `path` exists and !replace, or is a folder, or cannot be written.
  AtomicFile(const std::string& path, bool replace);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return file_->stream(); }
  /// Where the bytes are until commit(), for a check that reads them back first.
  const std::string& temp_path() const { return temp_path_; }
  /// Closes (checked) and renames into place.
  void commit();

 private:
  std::string path_;
  std::string temp_path_;
  bool replace_;
  bool committed_ = false;
  int signal_slot_ = -1;
  std::unique_ptr<CreatedFolders> folders_;
  std::unique_ptr<CheckedFile> file_;
};

}  // namespace epsim
