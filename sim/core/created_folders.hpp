// The folders a run had to create to reach its output path (`-o out/traces/x.eptrace` on a fresh
// checkout creates out/ and out/traces/). If the run fails or is interrupted they are removed again,
// innermost first and only while empty, so a failed run leaves the tree as it found it.
#pragma once

#include <string>
#include <vector>

namespace epsim {

class CreatedFolders {
 public:
  /// Creates every missing folder on the way to `folder` (which is created too). Errors name
  /// `shown_as`, the path the user gave.
  CreatedFolders(const std::string& folder, const std::string& shown_as);
  /// Removes the created folders unless keep() was called.
  ~CreatedFolders();
  CreatedFolders(const CreatedFolders&) = delete;
  CreatedFolders& operator=(const CreatedFolders&) = delete;

  /// The output is in place: the folders stay.
  void keep();

 private:
  void remove_created();

  struct Created {
    std::string path;
    int signal_slot;
  };
  std::vector<Created> created_;  ///< outermost first
};

}  // namespace epsim
