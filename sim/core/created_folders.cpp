#include "sim/core/created_folders.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/input_error.hpp"
#include "sim/core/signal_cleanup.hpp"

namespace fs = std::filesystem;

namespace epsim {

CreatedFolders::CreatedFolders(const std::string& folder, const std::string& shown_as) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = fs::path(folder).lexically_normal(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (fs::exists(fs::symlink_status(p, ec))) {
      if (!fs::is_directory(p, ec))
        throw InputError(shown_as, "", "cannot create the output: '" + p.string() + "' is not a folder");
      break;
    }
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  try {
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      // Registered before it exists, so that a signal between the two removes it.
      const int slot = SignalCleanup::add_folder(it->string());
      if (::mkdir(it->c_str(), 0777) != 0) {
        const int err = errno;
        SignalCleanup::release(slot);
        if (err == EEXIST && fs::is_directory(*it, ec)) continue;  // made by someone else meanwhile: not ours
        throw InputError(shown_as, "", "cannot create folder '" + it->string() + "': " + std::strerror(err));
      }
      created_.push_back({it->string(), slot});
    }
  } catch (...) {
    remove_created();
    throw;
  }
}

CreatedFolders::~CreatedFolders() { remove_created(); }

void CreatedFolders::remove_created() {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    ::rmdir(it->path.c_str());  // fails harmlessly if something else was put inside meanwhile
    SignalCleanup::release(it->signal_slot);
  }
  created_.clear();
}

void CreatedFolders::keep() {
  for (const Created& c : created_) SignalCleanup::release(c.signal_slot);
  created_.clear();
}

}  // namespace epsim
