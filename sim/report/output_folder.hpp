// An output folder that appears whole or not at all. Files are written into "DIR.partial"; commit()
// renames it to DIR. If the run fails, the destructor removes the partial folder, so a user never
// finds half a result under the final name, and an existing DIR is never touched unless the user
// asked for it to be replaced (and then only once the new result is complete).
#pragma once

#include <string>

namespace epsim {

class OutputFolder {
 public:
  /// Throws InputError if `dir` exists and `overwrite` is false.
  OutputFolder(std::string dir, bool overwrite);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  /// Path of `file` inside the folder being written.
  std::string path(const std::string& file) const;
  /// Replaces `dir` with the finished folder.
  void commit();
  const std::string& final_dir() const { return dir_; }

 private:
  std::string dir_;
  std::string partial_;
  bool overwrite_;
  bool committed_ = false;
};

}  // namespace epsim
