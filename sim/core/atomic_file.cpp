#include "sim/core/atomic_file.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "sim/core/input_error.hpp"
#include "sim/core/rename_into_place.hpp"
#include "sim/core/signal_cleanup.hpp"

namespace fs = std::filesystem;

namespace epsim {

namespace {

const char* kExistsMessage = "the output file already exists; pass --force to replace it or choose another output";

// Unique per process and per file: two epsim processes, or two files of one, never share a name.
std::string temp_name_for(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  return (target.parent_path() / ("." + target.filename().string() + ".epsim-tmp-" + std::to_string(::getpid()) +
                                  "-" + std::to_string(counter++)))
      .string();
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path, bool replace) : path_(path), replace_(replace) {
  const fs::path target = fs::absolute(path).lexically_normal();
  if (path.empty() || target.filename().empty() || target.filename() == "." || target.filename() == "..")
    throw InputError(path, "", "the output must name a file");
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(target, ec);
  if (fs::is_directory(status)) throw InputError(path, "", "the output path is a folder, not a file");
  if (fs::exists(status) && !replace) throw InputError(path, "", kExistsMessage);
  folders_ = std::make_unique<CreatedFolders>(target.parent_path().string(), path);
  temp_path_ = temp_name_for(target);
  signal_slot_ = SignalCleanup::add_file(temp_path_);
  try {
    file_ = std::make_unique<CheckedFile>(temp_path_, path);
  } catch (...) {
    SignalCleanup::release(signal_slot_);
    throw;
  }
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  file_.reset();
  ::unlink(temp_path_.c_str());
  SignalCleanup::release(signal_slot_);
}

void AtomicFile::commit() {
  if (committed_) return;
  file_->close();
  const int err = replace_ ? (std::rename(temp_path_.c_str(), path_.c_str()) == 0 ? 0 : errno)
                           : rename_no_replace(temp_path_, path_);
  if (err == EEXIST)
    throw InputError(path_, "", "another file appeared at this path while epsim was writing it; nothing was "
                                "replaced (pass --force to replace it)");
  if (err != 0) throw InputError(path_, "", std::string("cannot move the finished file into place: ") + std::strerror(err));
  committed_ = true;
  SignalCleanup::release(signal_slot_);
  folders_->keep();
}

}  // namespace epsim
