// A file being written whose every write, flush and close is checked. std::ofstream only sets a
// failbit that callers forget to test, and loses errno on the way; here the first failure (disk full,
// a file-size limit, an I/O error) throws InputError at once, naming the file as the user knows it and
// the system's reason, so a run never reports success over a truncated result.
#pragma once

#include <memory>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

namespace epsim {

class CheckedFile {
 public:
  /// Creates `path`, which must not exist yet (O_EXCL: never truncates anything), readable as the
  /// umask allows. Errors name `shown_as` (the path the user gave), or `path` if that is empty.
  CheckedFile(const std::string& path, const std::string& shown_as = "");
  /// Takes an open descriptor (tests use /dev/full).
  CheckedFile(int fd, std::string shown_as);
  /// Closes without checking: the caller is giving up on this file.
  ~CheckedFile();
  CheckedFile(const CheckedFile&) = delete;
  CheckedFile& operator=(const CheckedFile&) = delete;

  /// Writes go through a buffer; a failed write throws InputError out of the `<<` that caused it.
  std::ostream& stream() { return stream_; }
  /// Flushes, syncs to the disk and closes; throws InputError on any failure. Idempotent.
  void close();

 private:
  class Buffer : public std::streambuf {
   public:
    explicit Buffer(CheckedFile& file);

   protected:
    int_type overflow(int_type ch) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

   private:
    CheckedFile& file_;
    std::vector<char> bytes_;
  };

  void write_all(const char* data, std::size_t n);
  [[noreturn]] void fail(const std::string& what, int err);

  int fd_ = -1;
  std::string shown_as_;
  std::string first_error_;  ///< the first failure, reported again by close()
  Buffer buffer_;
  std::ostream stream_;
};

}  // namespace epsim
