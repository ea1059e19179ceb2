#include "sim/sweep/scratch_inputs.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "sim/core/input_error.hpp"
#include "sim/core/signal_cleanup.hpp"

namespace fs = std::filesystem;

namespace epsim {

ScratchInputs::ScratchInputs() {
  std::string pattern = (fs::temp_directory_path() / "epsim-sweep-XXXXXX").string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    throw InputError(pattern, "", std::string("cannot create a temporary folder: ") + std::strerror(errno));
  dir_ = buf.data();
  dir_slot_ = SignalCleanup::add_folder(dir_);
}

ScratchInputs::~ScratchInputs() {
  for (const File& f : files_) {
    ::unlink(f.path.c_str());
    SignalCleanup::release(f.signal_slot);
  }
  ::rmdir(dir_.c_str());
  SignalCleanup::release(dir_slot_);
}

std::string ScratchInputs::write(const std::string& name, const std::string& text, const std::string& shown) {
  const std::string path = dir_ + "/" + name;
  File* file = nullptr;
  for (File& f : files_)
    if (f.path == path) file = &f;
  if (!file) {
    files_.push_back(File{path, shown, SignalCleanup::add_file(path)});
    file = &files_.back();
  }
  file->shown = shown;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw InputError(path, "", "cannot write a temporary file of the sweep");
  return path;
}

std::string ScratchInputs::rewrite(std::string message) const {
  for (const File& f : files_) {
    std::size_t at;
    while ((at = message.find(f.path)) != std::string::npos) {
      // The path and up to two ":number" after it (line and column in the derived file).
      std::size_t end = at + f.path.size();
      for (int part = 0; part < 2; ++part) {
        if (end < message.size() && message[end] == ':' && end + 1 < message.size() &&
            std::isdigit(static_cast<unsigned char>(message[end + 1]))) {
          ++end;
          while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
        }
      }
      message.replace(at, end - at, f.shown);
    }
  }
  return message;
}

}  // namespace epsim
