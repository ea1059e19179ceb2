// The pieces that keep a user's files safe, tested directly: the checked file, the atomic file, the
// output folder's ownership rule, its lock, and the cleanup when a signal stops the process.
#include <doctest/doctest.h>

#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/core/atomic_file.hpp"
#include "sim/core/checked_file.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/signal_cleanup.hpp"
#include "sim/report/output_folder.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using epsim::AtomicFile;
using epsim::CheckedFile;
using epsim::InputError;
using epsim::OutputFolder;
using epsim::SignalCleanup;
using namespace epsim::test;

namespace {

void write_result(const fs::path& dir, const std::string& text, bool overwrite) {
  OutputFolder f(dir.string(), overwrite);
  f.open("a.txt") << text;
  f.open("b.txt") << text << text;
  f.commit();
}

// Runs `body` in a child process and returns how the child ended (waitpid status).
template <class F>
int in_child(F body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("a failed write names the file and the system's reason, at once and again at close") {
  const int fd = ::open("/dev/full", O_WRONLY);
  REQUIRE(fd >= 0);
  CheckedFile f(fd, "out/summary.txt");
  f.stream() << "short";  // buffered: nothing written yet
  CHECK_THROWS_WITH_AS(f.stream() << std::string(1 << 17, 'x'), doctest::Contains("out/summary.txt: cannot write: No space left on device"),
                       InputError);
  CHECK_THROWS_WITH_AS(f.close(), doctest::Contains("No space left on device"), InputError);
}

TEST_CASE("a checked file never truncates an existing file") {
  const fs::path dir = scratch_dir("checked_file_excl");
  write_file(dir / "mine.txt", "keep");
  CHECK_THROWS_WITH_AS(CheckedFile((dir / "mine.txt").string()), doctest::Contains("File exists"), InputError);
  CHECK(read_file(dir / "mine.txt") == "keep");
}

TEST_CASE("an atomic file appears whole on commit, never over a file without replace, and leaves nothing if abandoned") {
  const fs::path dir = scratch_dir("atomic_file");
  const std::string path = (dir / "sub/deeper/x.yaml").string();
  {
    AtomicFile f(path, false);
    f.stream() << "half";
    CHECK(fs::exists(dir / "sub/deeper"));
    CHECK_FALSE(fs::exists(path));
    CHECK(leftovers(dir / "sub/deeper").size() == 1);
  }
  CHECK_FALSE(fs::exists(dir / "sub"));  // the folders it made are gone with it
  {
    AtomicFile f(path, false);
    f.stream() << "whole";
    f.commit();
  }
  CHECK(read_file(path) == "whole");
  CHECK_THROWS_WITH_AS(AtomicFile(path, false), doctest::Contains("already exists; pass --force"), InputError);
  fs::remove(path);
  {
    AtomicFile f(path, false);  // no file yet when it started ...
    AtomicFile g(path, false);
    g.stream() << "first";
    g.commit();                 // ... but one appeared meanwhile: not replaced
    f.stream() << "second";
    CHECK_THROWS_WITH_AS(f.commit(), doctest::Contains("appeared"), InputError);
  }
  CHECK(read_file(path) == "first");
  {
    AtomicFile f(path, true);
    f.stream() << "replaced";
    f.commit();
  }
  CHECK(read_file(path) == "replaced");
  CHECK(leftovers(dir / "sub/deeper").empty());
  CHECK_THROWS_WITH_AS(AtomicFile(dir.string(), true), doctest::Contains("folder"), InputError);
  CHECK(SignalCleanup::in_use() == 0);
}

TEST_CASE("the file-system root and the folders above the current one are never output folders") {
  CHECK_THROWS_WITH_AS(OutputFolder("/", true), doctest::Contains("file-system root"), InputError);
  CHECK_THROWS_WITH_AS(OutputFolder(".", true), doctest::Contains("current folder"), InputError);
  CHECK_THROWS_WITH_AS(OutputFolder("..", true), doctest::Contains("current folder"), InputError);
  CHECK_THROWS_WITH_AS(OutputFolder(fs::current_path().string() + "/", true), doctest::Contains("current folder"),
                       InputError);
  CHECK(SignalCleanup::in_use() == 0);
}

TEST_CASE("a folder is replaced only while it holds nothing but what epsim's marker lists") {
  const fs::path dir = scratch_dir("folder_ownership");
  const fs::path out = dir / "out";
  write_result(out, "one", false);
  CHECK(read_file(out / "b.txt") == "oneone");
  CHECK_THROWS_WITH_AS(write_result(out, "two", false), doctest::Contains("--overwrite"), InputError);
  write_result(out, "two", true);
  CHECK(read_file(out / "a.txt") == "two");

  write_file(out / "notes.md", "mine");
  CHECK_THROWS_WITH_AS(write_result(out, "three", true), doctest::Contains("notes.md"), InputError);
  CHECK(read_file(out / "a.txt") == "two");
  fs::remove(out / "notes.md");

  // A marker that does not list a file does not make it epsim's.
  fs::create_directories(out / "plots");
  CHECK_THROWS_WITH_AS(write_result(out, "three", true), doctest::Contains("plots/"), InputError);
  fs::remove(out / "plots");

  // A symbolic link in place of the folder is refused, not followed.
  fs::create_directory_symlink(out, dir / "link");
  CHECK_THROWS_WITH_AS(write_result(dir / "link", "x", true), doctest::Contains("symbolic link"), InputError);
  CHECK(leftovers(dir).empty());
  CHECK(SignalCleanup::in_use() == 0);
}

TEST_CASE("two writers of one output folder: the second is refused while the first writes") {
  const fs::path dir = scratch_dir("folder_lock");
  const fs::path out = dir / "out";
  {
    OutputFolder first(out.string(), true);
    first.open("a.txt") << "first";
    CHECK_THROWS_WITH_AS(OutputFolder(out.string(), true), doctest::Contains("another epsim process"), InputError);
    // Another output folder beside it is not blocked.
    write_result(dir / "other", "free", false);
    first.commit();
  }
  CHECK(read_file(out / "a.txt") == "first");
  write_result(out, "second", true);  // the lock went with the first writer
  CHECK(read_file(out / "a.txt") == "second");
  CHECK(leftovers(dir).empty());
}

TEST_CASE("a leftover staging folder of a killed run is cleared, one holding foreign files is refused") {
  const fs::path dir = scratch_dir("folder_leftover");
  const fs::path out = dir / "out";
  const pid_t pid = fork();
  if (pid == 0) {
    OutputFolder f(out.string(), false);
    f.open("a.txt") << "killed";
    f.open("b.txt").flush();
    std::raise(SIGKILL);  // no cleanup possible
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  CHECK(leftovers(dir).size() >= 1);  // the staging folder (and possibly the lock file)
  write_result(out, "next", false);
  CHECK(read_file(out / "a.txt") == "next");
  CHECK(leftovers(dir).empty());

  const fs::path stage = OutputFolder::stage_path(out.string());
  fs::create_directories(stage);
  write_file(stage / "someone-elses.txt", "?");
  CHECK_THROWS_WITH_AS(write_result(out, "again", true), doctest::Contains("remove it by hand"), InputError);
  CHECK(read_file(stage / "someone-elses.txt") == "?");
}

TEST_CASE("a signal while writing removes the staging folder, the lock and created parents, the old result stays") {
  const fs::path dir = scratch_dir("folder_signal");
  const fs::path out = dir / "out";
  write_result(out, "old", false);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    CAPTURE(sig);
    const int status = in_child([&] {
      SignalCleanup::install();
      OutputFolder replacing(out.string(), true);
      replacing.open("a.txt") << "new";
      replacing.open("c.txt") << std::string(100000, 'c');
      OutputFolder fresh((dir / "new/deep/out").string(), false);
      fresh.open("x.txt") << "x";
      std::raise(sig);
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK(read_file(out / "a.txt") == "old");
    CHECK(read_file(out / "b.txt") == "oldold");
    CHECK_FALSE(fs::exists(out / "c.txt"));
    CHECK_FALSE(fs::exists(dir / "new"));
    CHECK(leftovers(dir).empty());
  }
  // An atomic file, too.
  const int status = in_child([&] {
    SignalCleanup::install();
    AtomicFile f((dir / "t/x.eptrace").string(), false);
    f.stream() << std::string(100000, 't') << std::flush;
    std::raise(SIGTERM);
  });
  CHECK(WIFSIGNALED(status));
  CHECK_FALSE(fs::exists(dir / "t"));
}
