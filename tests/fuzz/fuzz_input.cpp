#include "tests/fuzz/fuzz_input.hpp"

#include <fstream>
#include <system_error>
#include <unistd.h>

namespace epsim::fuzz {

namespace {

std::filesystem::path make_scratch_dir() {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::filesystem::path dir = base / ("epsim-fuzz-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create scratch folder " + dir.string() + ": " + ec.message());
  return dir;
}

void remove_scratch_dir() {
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir(), ec);
}

}  // namespace

const std::filesystem::path& scratch_dir() {
  // Never destroyed, so that the exit handler that removes the folder can still name it.
  static const std::filesystem::path* dir = [] {
    auto* made = new std::filesystem::path(make_scratch_dir());
    std::atexit(remove_scratch_dir);
    return made;
  }();
  return *dir;
}

void write_bytes(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) fail("cannot write fuzz input to " + path.string());
}

std::string input_file(const std::uint8_t* data, std::size_t size, const std::string& name) {
  std::filesystem::path path = scratch_dir() / name;
  write_bytes(path, data, size);
  return path.string();
}

std::filesystem::path source_dir() { return EPSIM_SOURCE_DIR; }

bool verbose() {
  static const bool on = std::getenv("EPSIM_FUZZ_VERBOSE") != nullptr;
  return on;
}

void fail(const std::string& what) {
  std::fprintf(stderr, "epsim fuzz failure: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace epsim::fuzz
