// What every libFuzzer target of epsim shares: a private scratch folder for the files a reader takes by
// path, and the rule that bad input may only end in epsim::InputError. Any other exception escaping a
// reader is a bug (the CLI would call it an "internal error"), so it stops the fuzzer with its message,
// as a crash, sanitizer report, leak or timeout does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <typeinfo>

#include "sim/core/input_error.hpp"

namespace epsim::fuzz {

/// This process's own folder under the system temporary folder (created on first use, removed at exit),
/// so that fuzzers running side by side never share a file.
const std::filesystem::path& scratch_dir();

/// Replaces `path` with exactly `size` bytes of `data`.
void write_bytes(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size);

/// Writes the input to scratch_dir()/`name` and returns its path, for readers that take a path.
std::string input_file(const std::uint8_t* data, std::size_t size, const std::string& name);

/// The repository (models/, experiments/, traces/samples/), set by CMake.
std::filesystem::path source_dir();

/// Ends the process with `what` on stderr: libFuzzer saves the input as a crash.
[[noreturn]] void fail(const std::string& what);

/// True when EPSIM_FUZZ_VERBOSE is set: each input's outcome is printed (accepted, or its InputError),
/// to see what a seed exercises when it is replayed.
bool verbose();

/// Runs `read`. epsim::InputError is the expected outcome of bad input; any other exception is a bug.
template <class Read>
void expect_only_input_errors(Read&& read) {
  try {
    read();
    if (verbose()) std::fprintf(stderr, "epsim fuzz: accepted\n");
  } catch (const InputError& e) {
    // Bad input reported the way a user sees it: file, place, what was expected.
    if (verbose()) std::fprintf(stderr, "epsim fuzz: InputError: %s\n", e.what());
  } catch (const std::exception& e) {
    fail(std::string("exception other than epsim::InputError escaped the reader: ") + typeid(e).name() +
         ": " + e.what());
  } catch (...) {
    fail("non-standard exception escaped the reader");
  }
}

}  // namespace epsim::fuzz
