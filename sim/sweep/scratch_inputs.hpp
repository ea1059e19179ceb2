// The files a sweep point derives (its hardware, model and experiment, as the point changes them) are
// loaded by the ordinary strict loaders, which read files. They are written to a private temporary
// folder, loaded and left there to be overwritten by the next point; the folder goes when the sweep's
// files are loaded (or a signal stops the process). Messages that name a derived file are rewritten
// to name the file it was derived from, since the temporary one is gone by the time the user reads them.
#pragma once

#include <string>
#include <vector>

namespace epsim {

class ScratchInputs {
 public:
  ScratchInputs();
  ~ScratchInputs();
  ScratchInputs(const ScratchInputs&) = delete;
  ScratchInputs& operator=(const ScratchInputs&) = delete;

  /// Writes `text` to the scratch file `name` (a plain name) and returns its absolute path. `shown`
  /// is how messages name it ("hardware models/h100-sxm-8.yaml as this point changes it").
  std::string write(const std::string& name, const std::string& text, const std::string& shown);
  /// `message` with every scratch path (and the ":line:col" after it) replaced by its `shown` name.
  std::string rewrite(std::string message) const;

 private:
  struct File {
    std::string path;
    std::string shown;
    int signal_slot;
  };
  std::string dir_;
  int dir_slot_ = -1;
  std::vector<File> files_;
};

}  // namespace epsim
