#include "sim/report/output_folder.hpp"

#include <filesystem>
#include <system_error>

#include "sim/core/input_error.hpp"

namespace fs = std::filesystem;

namespace epsim {

OutputFolder::OutputFolder(std::string dir, bool overwrite)
    : dir_(std::move(dir)), partial_(dir_ + ".partial"), overwrite_(overwrite) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  partial_ = dir_ + ".partial";
  if (fs::exists(dir_) && !overwrite_)
    throw InputError(dir_, "", "output folder already exists; pass --overwrite to replace it or choose another output");
  std::error_code ec;
  fs::remove_all(partial_, ec);  // a leftover of a run that was killed: ours to remove
  fs::create_directories(partial_, ec);
  if (ec) throw InputError(partial_, "", "cannot create output folder: " + ec.message());
}

OutputFolder::~OutputFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(partial_, ec);
}

std::string OutputFolder::path(const std::string& file) const { return (fs::path(partial_) / file).string(); }

void OutputFolder::commit() {
  std::error_code ec;
  if (overwrite_) fs::remove_all(dir_, ec);
  fs::rename(partial_, dir_, ec);
  if (ec) throw InputError(dir_, "", "cannot move finished output into place: " + ec.message());
  committed_ = true;
}

}  // namespace epsim
