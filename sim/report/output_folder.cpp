#include "sim/report/output_folder.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/input_error.hpp"
#include "sim/core/rename_into_place.hpp"
#include "sim/core/signal_cleanup.hpp"
#include "sim/report/output_marker.hpp"

namespace fs = std::filesystem;

namespace epsim {

namespace {

// True if `inner` is `outer` or lies inside it (component-wise, on normalised absolute paths).
bool contains(const fs::path& outer, const fs::path& inner) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i)
    if (i == inner.end() || *o != *i) return false;
  return true;
}

fs::path absolute_target(const std::string& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "out/" names out
  return p;
}

}  // namespace

std::string OutputFolder::stage_path(const std::string& target) {
  const fs::path t(target);
  return (t.parent_path() / ("." + t.filename().string() + ".epsim-stage")).string();
}

OutputFolder::OutputFolder(std::string dir, bool overwrite) : shown_(std::move(dir)), overwrite_(overwrite) {
  if (shown_.empty()) throw InputError("command line", "", "the output folder name is empty");
  target_ = absolute_target(shown_);
  std::error_code ec;
  const fs::path cwd = fs::weakly_canonical(fs::current_path(ec), ec);
  if (target_ == target_.root_path() || contains(fs::weakly_canonical(target_, ec), cwd))
    throw InputError(shown_, "", "the output folder must not be the current folder, one of its parents or the "
                                 "file-system root; name a new folder such as out/run1");
  const fs::file_status status = fs::symlink_status(target_, ec);
  if (fs::is_symlink(status)) throw InputError(shown_, "", "the output folder is a symbolic link; name the folder itself");
  if (fs::exists(status) && !fs::is_directory(status))
    throw InputError(shown_, "", "the output path exists and is not a folder");
  if (fs::exists(status) && !overwrite_ && !fs::is_empty(target_, ec))
    throw InputError(shown_, "", "output folder already exists; pass --overwrite to replace it or choose another output");

  parents_ = std::make_unique<CreatedFolders>(target_.parent_path().string(), shown_);
  lock_ = std::make_unique<OutputLock>(target_.string(), shown_);
  if (fs::exists(status)) check_replaceable();
  stage_ = stage_path(target_.string());
  clear_leftover_stage();

  stage_slot_ = SignalCleanup::add_folder(stage_.string());
  if (::mkdir(stage_.c_str(), 0777) != 0) {
    const int err = errno;
    SignalCleanup::release(stage_slot_);
    stage_slot_ = -1;
    throw InputError(shown_, "", "cannot create the staging folder '" + stage_.string() + "': " + std::strerror(err));
  }
  const std::string marker = (stage_ / kOutputMarkerName).string();
  marker_slot_ = SignalCleanup::add_file(marker);
  try {
    marker_ = std::make_unique<CheckedFile>(marker, shown_ + "/" + kOutputMarkerName);
    marker_->stream() << kOutputMarkerHeader << "\n"
                      << "# every file named below was written by epsim; --overwrite replaces this folder only "
                         "while it holds nothing else\n"
                      << std::flush;
  } catch (...) {
    remove_stage();
    throw;
  }
}

void OutputFolder::check_replaceable() const {
  const std::vector<std::string> foreign = foreign_entries(target_);
  if (!foreign.empty())
    throw InputError(shown_, "",
                     "the folder holds files epsim did not write (" + describe_entries(foreign) +
                         "); --overwrite replaces only a folder epsim wrote itself: move them away or choose "
                         "another output");
}

void OutputFolder::clear_leftover_stage() {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(stage_, ec))) return;
  // A run killed outright (SIGKILL, power loss) had no chance to clean up; we hold the lock now, so
  // its staging folder is nobody's work in progress.
  if (!fs::is_directory(fs::symlink_status(stage_, ec)) || !foreign_entries(stage_).empty() ||
      !remove_owned_folder(stage_))
    throw InputError(shown_, "", "'" + stage_.string() + "', left by an interrupted run, holds files epsim cannot "
                                 "prove are its own; remove it by hand");
}

std::ostream& OutputFolder::open(const std::string& file) {
  if (file.empty() || file[0] == '.' || file.find('/') != std::string::npos)
    throw std::logic_error("output file names are plain names: '" + file + "'");
  for (const Written& w : files_)
    if (w.name == file) throw std::logic_error("output file opened twice: " + file);
  // Listed in the marker before it exists, so a killed run's staging folder is provably epsim's.
  marker_->stream() << file << "\n" << std::flush;
  const std::string path = (stage_ / file).string();
  const int slot = SignalCleanup::add_file(path);
  try {
    files_.push_back({file, std::make_unique<CheckedFile>(path, shown_ + "/" + file), slot});
  } catch (...) {
    SignalCleanup::release(slot);
    throw;
  }
  return files_.back().file->stream();
}

void OutputFolder::commit() {
  if (committed_) return;
  for (Written& w : files_) w.file->close();
  marker_->close();

  const SignalCleanup::Defer defer;  // from here the new result goes in whole or the old one stays
  std::error_code ec;
  if (fs::exists(fs::symlink_status(target_, ec))) {
    if (overwrite_)
      check_replaceable();  // again: we hold the lock against epsim, not against the user
    else if (!fs::is_empty(target_, ec))
      throw InputError(shown_, "", "another process wrote this folder while epsim was running; nothing was "
                                   "replaced (pass --overwrite to replace it)");
    const std::string spare = target_.parent_path() / ("." + target_.filename().string() + ".epsim-old");
    const int err = rename_exchange(stage_.string(), target_.string(), spare);
    if (err != 0) throw InputError(shown_, "", std::string("cannot replace the old result: ") + std::strerror(err));
    // stage_ now holds the old result, whose files its marker lists.
    remove_owned_folder(stage_);
  } else {
    const int err = rename_no_replace(stage_.string(), target_.string());
    if (err == EEXIST)
      throw InputError(shown_, "", "another process created this folder while epsim was running; nothing was "
                                   "replaced (pass --overwrite to replace it)");
    if (err != 0) throw InputError(shown_, "", std::string("cannot move the result into place: ") + std::strerror(err));
  }
  committed_ = true;
  for (Written& w : files_) SignalCleanup::release(w.signal_slot);
  SignalCleanup::release(marker_slot_);
  SignalCleanup::release(stage_slot_);
  parents_->keep();
  lock_.reset();
}

void OutputFolder::remove_stage() {
  for (Written& w : files_) {
    w.file.reset();
    ::unlink((stage_ / w.name).c_str());
    SignalCleanup::release(w.signal_slot);
  }
  files_.clear();
  marker_.reset();
  if (marker_slot_ >= 0) ::unlink((stage_ / kOutputMarkerName).c_str());
  SignalCleanup::release(marker_slot_);
  marker_slot_ = -1;
  if (stage_slot_ >= 0) ::rmdir(stage_.c_str());
  SignalCleanup::release(stage_slot_);
  stage_slot_ = -1;
}

OutputFolder::~OutputFolder() {
  if (!committed_) remove_stage();
}

}  // namespace epsim
