// The bad-input corpus (tests/bad_inputs/, described in its README.md): every case is a command a user
// could type on damaged or absurd input. Each must end with exit status 2, exactly one line on stderr
// that names the file, the place and what was expected, and the case's folder exactly as it was:
// nothing written, nothing removed, no temporary, staging or lock file left behind.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

fs::path corpus_dir() { return source_dir() / "tests/bad_inputs"; }

/// One step that builds an input file in the case's work folder (applied in the order written).
struct Edit {
  std::string op;   // copy, replace, truncate, patch, flip, append, checksum, extend
  std::string arg;  // the rest of the line
};

struct Case {
  std::string name;
  std::string about;
  std::string command;
  std::vector<std::string> expect;
  std::vector<Edit> edits;
  std::size_t memory_limit_MiB = 0;  // address-space limit for the command, so a huge allocation fails
  std::size_t nest_depth = 0;
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

/// `@MODELS@`, `@EXPERIMENTS@` and `@SOURCE@` become the repository's folders (absolute paths).
std::string substitute(std::string text) {
  const std::pair<std::string, fs::path> names[] = {{"@MODELS@", source_dir() / "models"},
                                                    {"@EXPERIMENTS@", source_dir() / "experiments"},
                                                    {"@SOURCE@", source_dir()}};
  for (const auto& [token, path] : names)
    for (std::size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + path.string().size()))
      text.replace(at, token.size(), path.string());
  return text;
}

Case parse_case(const fs::path& dir) {
  Case c;
  c.name = dir.filename().string();
  std::istringstream in(read_file(dir / "case.txt"));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto colon = t.find(':');
    if (colon == std::string::npos) throw std::runtime_error(c.name + "/case.txt:" + std::to_string(n) + ": no 'key:'");
    const std::string key = t.substr(0, colon);
    const std::string value = trim(t.substr(colon + 1));
    if (key == "about")
      c.about = value;
    else if (key == "command")
      c.command = substitute(value);
    else if (key == "expect")
      c.expect.push_back(value);
    else if (key == "nest")
      c.nest_depth = std::stoul(value);
    else if (key == "memory_limit_MiB")
      c.memory_limit_MiB = std::stoul(value);
    else if (key == "copy" || key == "replace" || key == "truncate" || key == "patch" || key == "flip" ||
             key == "append" || key == "checksum" || key == "extend")
      c.edits.push_back({key, value});
    else
      throw std::runtime_error(c.name + "/case.txt:" + std::to_string(n) + ": unknown key '" + key + "'");
  }
  if (c.about.empty() || c.command.empty() || c.expect.empty())
    throw std::runtime_error(c.name + "/case.txt: needs about:, command: and at least one expect:");
  return c;
}

std::vector<std::uint8_t> hex_bytes(const std::string& hex) {
  std::vector<std::uint8_t> out;
  std::string digits;
  for (char ch : hex)
    if (ch != ' ') digits += ch;
  if (digits.size() % 2) throw std::runtime_error("odd number of hex digits: " + hex);
  for (std::size_t i = 0; i < digits.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return out;
}

std::uint64_t fnv1a64(const std::string& bytes, std::size_t from, std::size_t to) {
  std::uint64_t h = 14695981039346656037ull;
  for (std::size_t i = from; i < to; ++i) {
    h ^= static_cast<std::uint8_t>(bytes[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::uint64_t number(const std::string& s) { return std::stoull(s, nullptr, 0); }

/// `\n` in a case.txt value stands for a line break (a case file is one directive per line).
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// `nest: N` turns every `@NEST@` in the work folder's files into N nested empty arrays, so a case
/// can hold a value a hundred thousand levels deep in a line of text.
void expand_nesting(const Case& c, const fs::path& work) {
  if (c.nest_depth == 0) return;
  const std::string nested = std::string(c.nest_depth, '[') + std::string(c.nest_depth, ']');
  bool found = false;
  for (const auto& e : fs::recursive_directory_iterator(work)) {
    if (!e.is_regular_file()) continue;
    std::string text = read_file(e.path());
    const auto at = text.find("@NEST@");
    if (at == std::string::npos) continue;
    text.replace(at, 6, nested);
    write_file(e.path(), text);
    found = true;
  }
  if (!found) throw std::runtime_error(c.name + ": nest: no @NEST@ in any input file");
}

/// Applies the case's edits inside `work`. `copy: SRC [as NAME]` copies a file (SRC relative to
/// tests/bad_inputs/, or @MODELS@/...) and makes it the file the following edits change; `replace: OLD => NEW`
/// changes text that must occur exactly once; the binary edits take byte offsets (decimal or 0x...).
void apply_edits(const Case& c, const fs::path& work) {
  fs::path target;
  for (const Edit& e : c.edits) {
    if (e.op == "copy") {
      const auto as = e.arg.find(" as ");
      const fs::path src = corpus_dir() / substitute(e.arg.substr(0, as));
      target = work / (as == std::string::npos ? src.filename().string() : trim(e.arg.substr(as + 4)));
      if (!fs::is_regular_file(src)) throw std::runtime_error(c.name + ": copy: no file " + src.string());
      write_file(target, read_file(src));
      continue;
    }
    if (target.empty()) throw std::runtime_error(c.name + ": '" + e.op + "' before any 'copy'");
    if (e.op == "extend") {
      // A sparse file: as long as a huge trace, taking no disk space.
      const std::uint64_t n = number(e.arg);
      if (n <= fs::file_size(target)) throw std::runtime_error(c.name + ": extend: the file is already that long");
      fs::resize_file(target, n);
      continue;
    }
    std::string bytes = read_file(target);
    if (e.op == "replace") {
      const auto arrow = e.arg.find(" =>");
      if (arrow == std::string::npos) throw std::runtime_error(c.name + ": replace needs 'OLD => NEW'");
      const std::string from = unescape(e.arg.substr(0, arrow)),
                        to = substitute(unescape(trim(e.arg.substr(arrow + 3))));
      const auto at = bytes.find(from);
      if (at == std::string::npos || bytes.find(from, at + 1) != std::string::npos)
        throw std::runtime_error(c.name + ": replace: '" + from + "' does not occur exactly once in " +
                                 target.filename().string());
      bytes.replace(at, from.size(), to);
    } else if (e.op == "truncate") {
      const std::uint64_t n = number(e.arg);
      if (n >= bytes.size())
        throw std::runtime_error(c.name + ": truncate: the file is only " + std::to_string(bytes.size()) + " bytes");
      bytes.resize(n);
    } else if (e.op == "patch") {
      std::istringstream in(e.arg);
      std::string at, hex, rest;
      in >> at;
      std::getline(in, hex);
      const std::uint64_t offset = number(at);
      const auto patch = hex_bytes(hex);
      if (offset + patch.size() > bytes.size()) throw std::runtime_error(c.name + ": patch beyond the end of the file");
      for (std::size_t i = 0; i < patch.size(); ++i) bytes[offset + i] = static_cast<char>(patch[i]);
    } else if (e.op == "flip") {
      std::istringstream in(e.arg);
      std::string at, bit;
      in >> at >> bit;
      const std::uint64_t offset = number(at);
      if (offset >= bytes.size()) throw std::runtime_error(c.name + ": flip beyond the end of the file");
      bytes[offset] = static_cast<char>(static_cast<std::uint8_t>(bytes[offset]) ^ (1u << number(bit)));
    } else if (e.op == "append") {
      for (std::uint8_t b : hex_bytes(e.arg)) bytes += static_cast<char>(b);
    } else if (e.op == "checksum") {
      // `checksum: FROM TO`: FNV-1a 64 of bytes [FROM, TO) stored little-endian at TO, as the format does.
      std::istringstream in(e.arg);
      std::string from, to;
      in >> from >> to;
      const std::uint64_t a = number(from), b = number(to);
      if (a > b || b + 8 > bytes.size()) throw std::runtime_error(c.name + ": checksum range beyond the file");
      std::uint64_t h = fnv1a64(bytes, a, b);
      for (int i = 0; i < 8; ++i, h >>= 8) bytes[b + i] = static_cast<char>(h & 0xff);
    }
    write_file(target, bytes);
  }
}

bool is_text(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".json" || ext == ".jsonl" || ext == ".csv" || ext == ".txt";
}

/// Copies the case's own files (all but case.txt) into `work`, substituting paths in text files.
void copy_case_files(const fs::path& from, const fs::path& work) {
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const fs::path rel = fs::relative(e.path(), from);
    if (rel == "case.txt") continue;
    if (e.is_directory()) {
      fs::create_directories(work / rel);
    } else {
      const std::string bytes = read_file(e.path());
      write_file(work / rel, is_text(rel) ? substitute(bytes) : bytes);
    }
  }
}

/// A file's length and a 64-bit checksum of its bytes, read in pieces and mixed eight bytes at a time
/// (a case's sparse file is a gigabyte long).
std::string digest(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t h = 14695981039346656037ull, length = 0;
  std::vector<char> buffer(1 << 20);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    const auto n = static_cast<std::size_t>(in.gcount());
    for (std::size_t i = 0; i < n; i += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, buffer.data() + i, std::min<std::size_t>(8, n - i));
      h = (h ^ word) * 1099511628211ull;
    }
    length += n;
  }
  return std::to_string(length) + " bytes, checksum " + std::to_string(h);
}

/// Every entry under `dir`, hidden ones included: folders by name, files by length and checksum, links
/// with their target. Equal snapshots mean nothing was written, removed or left behind.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> entries;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), dir).string();
    if (it->is_symlink()) {
      entries[rel] = "link -> " + fs::read_symlink(it->path()).string();
      it.disable_recursion_pending();
    } else if (it->is_directory()) {
      entries[rel] = "folder";
    } else {
      entries[rel] = "file: " + digest(it->path());
    }
  }
  return entries;
}

std::string differences(const std::map<std::string, std::string>& before,
                        const std::map<std::string, std::string>& after) {
  std::string out;
  for (const auto& [path, what] : after) {
    const auto b = before.find(path);
    if (b == before.end())
      out += " added " + path + ";";
    else if (b->second != what)
      out += " changed " + path + ";";
  }
  for (const auto& [path, what] : before)
    if (!after.count(path)) out += " removed " + path + ";";
  return out;
}

/// The number of lines of `s` (a last line without '\n' counts).
std::size_t lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')) + (!s.empty() && s.back() != '\n' ? 1 : 0);
}

std::vector<std::string> words_of(const std::string& command) {
  std::istringstream in(command);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

/// True if the command names the file-system root (`/`, `//`, ...) as its output.
bool outputs_to_root(const std::string& command) {
  const std::vector<std::string> w = words_of(command);
  for (std::size_t i = 0; i + 1 < w.size(); ++i)
    if ((w[i] == "-o" || w[i] == "--output") && w[i + 1].find_first_not_of('/') == std::string::npos) return true;
  return false;
}

/// The command with its output replaced by `output`, and --overwrite kept or dropped.
std::string with_output(const std::string& command, const std::string& output, bool overwrite) {
  const std::vector<std::string> w = words_of(command);
  std::string out;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] == "--overwrite" && !overwrite) continue;
    out += (out.empty() ? "" : " ") + w[i];
    if ((w[i] == "-o" || w[i] == "--output") && i + 1 < w.size()) out += " " + output, ++i;
  }
  return out;
}

/// Before a case hands `-o /` and --overwrite to the binary, the binary must be seen refusing the root
/// without that risk: `-o /` without --overwrite has to be refused as the file-system root (a binary
/// without the check reports an existing folder instead and touches nothing), and `-o . --overwrite`
/// in a scratch folder, where a binary without the check could only destroy scratch files, must leave
/// them in place.
void require_root_refused(const Case& c) {
  const fs::path guard = scratch_dir("bad_inputs_root_guard");
  copy_case_files(corpus_dir() / c.name, guard);
  apply_edits(c, guard);
  expand_nesting(c, guard);
  write_file(guard / "sentinel.txt", "must survive");
  const std::string plain = with_output(c.command, "/", false);
  const CliResult root = run_epsim(plain, guard);
  INFO("guard: epsim " << plain << ": " << root.err);
  REQUIRE(root.status == 2);
  REQUIRE(root.err.find("file-system root") != std::string::npos);
  const std::string dot = with_output(c.command, ".", true);
  const CliResult here = run_epsim(dot, guard);
  INFO("guard: epsim " << dot << ": " << here.err);
  REQUIRE(here.status == 2);
  REQUIRE(read_file(guard / "sentinel.txt") == "must survive");
}

/// `ulimit -v` for a case that declares sizes far beyond its file: reading it must not allocate them.
/// AddressSanitizer reserves terabytes of address space up front, so under it the limit is left out
/// (the sanitizer reports a huge allocation by itself).
std::string memory_limit_prefix(const Case& c) {
#if defined(__SANITIZE_ADDRESS__)
  return "";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return "";
#endif
#endif
  return c.memory_limit_MiB == 0 ? "" : "ulimit -v " + std::to_string(c.memory_limit_MiB * 1024) + ";";
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(corpus_dir()))
    if (e.is_directory() && fs::exists(e.path() / "case.txt")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("the bad-input corpus: exit 2, one line naming the file and the place, nothing written or removed") {
  const std::vector<std::string> names = case_names();
  REQUIRE(names.size() >= 60);
  for (const std::string& name : names) {
    SUBCASE(name.c_str()) {
      const Case c = parse_case(corpus_dir() / name);
      INFO("case " << name << ": " << c.about);
      INFO("command: epsim " << c.command);
      // The work folder sits one level down so that `-o ..` still lands inside what is checked.
      const fs::path root = scratch_dir("bad_inputs/" + name);
      const fs::path work = root / "work";
      fs::create_directories(work);
      copy_case_files(corpus_dir() / name, work);
      apply_edits(c, work);
      expand_nesting(c, work);
      if (outputs_to_root(c.command) && c.command.find("--overwrite") != std::string::npos) require_root_refused(c);
      const auto before = snapshot(root);

      const CliResult r = run_epsim(c.command, work, memory_limit_prefix(c));
      INFO("stderr: " << r.err);
      CHECK(r.status == 2);
      CHECK(lines(r.err) == 1);
      CHECK(r.err.rfind("epsim: error: ", 0) == 0);
      for (const std::string& text : c.expect) {
        INFO("expected on stderr: " << text);
        CHECK(r.err.find(text) != std::string::npos);
      }
      const auto after = snapshot(root);
      INFO("changes:" << differences(before, after));
      CHECK(after == before);
      CHECK(leftovers(work).empty());
      CHECK(leftovers(root).empty());
    }
  }
}
