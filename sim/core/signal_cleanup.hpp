// What a run removes if it is stopped by a signal (Ctrl-C, kill, a closed terminal): the temporary
// files and folders it is writing, so that an interrupted run leaves the user's folders as they were.
//
// A signal handler may only call async-signal-safe functions, so the paths live in a fixed table of
// static memory, registered before the files are created and released once they are in place or
// removed. The handler unlinks the registered files, removes the registered folders (innermost first,
// and only if empty, since rmdir never removes contents), then lets the signal end the process as it
// would have (exit status 128 + signal number in a shell).
#pragma once

#include <signal.h>

#include <string>

namespace epsim {

class SignalCleanup {
 public:
  /// Installs the handler for SIGINT, SIGTERM, SIGHUP and SIGQUIT, and ignores SIGXFSZ so that a
  /// file-size limit turns into a write error epsim reports instead of killing the process. Once per
  /// process, from main().
  static void install();

  /// Registers a file to unlink (or a folder to rmdir) if a signal arrives. Returns a slot to
  /// release(). Throws InputError naming `path` if the table is full or the path too long: a file
  /// epsim could not clean up is a file it must not create.
  static int add_file(const std::string& path);
  static int add_folder(const std::string& path);
  /// Forgets a slot (the file was committed or removed). -1 is ignored.
  static void release(int slot);

  /// Slots in use (tests check that everything registered is released).
  static int in_use();

  /// Holds those signals back (in this thread) while alive, for steps that must finish once begun:
  /// moving a finished result into place and removing the one it replaced. A signal that arrives
  /// meanwhile is delivered when the step is done.
  class Defer {
   public:
    Defer();
    ~Defer();
    Defer(const Defer&) = delete;
    Defer& operator=(const Defer&) = delete;

   private:
    sigset_t saved_;  ///< the mask before
  };
};

}  // namespace epsim
