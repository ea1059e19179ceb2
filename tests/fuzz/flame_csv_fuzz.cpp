// The FLAME-MoE CSV importer (traces/import/flame_csv.*), which reads a batch folder. The input is
// that folder written out as one text: lines "== FOLDER" start a CSV file in FOLDER (a relative path
// of letters, digits and '_' such as "Layer_2" or "2nd/Layer_5"), the lines up to the next "==" line
// are its contents; text before the first "==" line goes to Layer_0. Every folder holds one file,
// "trace.csv". What the importer writes must read back.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "tests/fuzz/fuzz_input.hpp"
#include "tests/fuzz/trace_roundtrip.hpp"
#include "traces/import/flame_csv.hpp"

namespace {

namespace fs = std::filesystem;

/// Folder names stay inside the batch folder: no "..", no absolute paths, at most two levels.
bool safe_folder(const std::string& name) {
  if (name.empty() || name.size() > 32 || name.front() == '/' || name.back() == '/') return false;
  int slashes = 0;
  char previous = '/';
  for (char c : name) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (c == '/') {
      if (previous == '/' || ++slashes > 1) return false;
    } else if (!word) {
      return false;
    }
    previous = c;
  }
  return true;
}

/// Writes the batch folder; false when the input names a folder outside the rules above.
bool write_batch(const fs::path& batch, const std::string& text) {
  std::vector<std::pair<std::string, std::string>> files = {{"Layer_0", ""}};  // folder, contents
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string line = text.substr(at, end - at);
    if (line.rfind("== ", 0) == 0) {
      std::string folder = line.substr(3);
      if (!folder.empty() && folder.back() == '\n') folder.pop_back();
      if (!safe_folder(folder)) return false;
      files.emplace_back(folder, "");
    } else {
      files.back().second += line;
    }
    at = end;
  }
  if (files.size() > 1 && files.front().second.empty()) files.erase(files.begin());
  std::error_code ec;
  fs::remove_all(batch, ec);
  std::map<std::string, std::string> merged;  // a folder named twice holds both parts
  for (const auto& [folder, contents] : files) merged[folder] += contents;
  for (const auto& [folder, contents] : merged) {
    fs::create_directories(batch / folder);
    epsim::fuzz::write_bytes(batch / folder / "trace.csv", reinterpret_cast<const std::uint8_t*>(contents.data()),
                             contents.size());
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path batch = epsim::fuzz::scratch_dir() / "Encoder_Batch_fuzz";
  if (!write_batch(batch, std::string(reinterpret_cast<const char*>(data), size))) return -1;
  const std::string out = (epsim::fuzz::scratch_dir() / "out.eptrace").string();
  epsim::fuzz::expect_only_input_errors([&] { epsim::import_flame_csv(batch.string(), 2, out, true); });
  epsim::fuzz::check_trace_reads_back(out);
  return 0;
}
