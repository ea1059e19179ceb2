// An output folder that appears whole or not at all, and that never costs the user a file.
//
// - The result is written into a hidden staging folder beside the target (".NAME.epsim-stage"), with a
//   marker listing every file (output_marker.hpp), and moved into place by commit() in one atomic
//   rename; replacing an old result (--overwrite) swaps the two folders in one step, then removes the
//   old files by name. A reader of DIR sees the old result or the new one, never a mix.
// - --overwrite replaces only a folder epsim can prove is its own (empty, or holding only what its
//   marker lists); the current folder, one of its parents and the file-system root are refused.
// - Two processes writing the same output are kept apart by a lock (output_lock.hpp).
// - Every write is checked (checked_file.hpp); a failure aborts the run with the file and the reason.
// - If the run fails, or a signal stops it (signal_cleanup.hpp), the staging folder, the lock and any
//   parent folders created for the output are removed, and DIR is as it was.
#pragma once

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "sim/core/checked_file.hpp"
#include "sim/core/created_folders.hpp"
#include "sim/core/output_lock.hpp"

namespace epsim {

class OutputFolder {
 public:
  /// Throws InputError if `dir` is not a folder epsim may write: it exists (not empty) and !overwrite,
  /// it holds files epsim did not write, it is the current folder or above it, or it is locked.
  OutputFolder(std::string dir, bool overwrite);
  /// Removes everything written so far unless commit() succeeded.
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  /// Creates `file` (a plain name) in the folder being written; the stream is checked on every write
  /// and stays valid until commit() or destruction.
  std::ostream& open(const std::string& file);
  /// Closes every file (checked) and puts the folder in place of `dir`.
  void commit();
  /// The staging folder's name for an absolute `target` (tests look for leftovers).
  static std::string stage_path(const std::string& target);

 private:
  struct Written {
    std::string name;
    std::unique_ptr<CheckedFile> file;
    int signal_slot;
  };

  void clear_leftover_stage();
  void check_replaceable() const;
  void remove_stage();

  std::string shown_;  ///< as the user gave it
  std::filesystem::path target_;
  std::filesystem::path stage_;
  bool overwrite_;
  bool committed_ = false;
  std::unique_ptr<CreatedFolders> parents_;
  std::unique_ptr<OutputLock> lock_;
  int stage_slot_ = -1;
  int marker_slot_ = -1;
  std::unique_ptr<CheckedFile> marker_;
  std::vector<Written> files_;
};

}  // namespace epsim
