#include "sim/core/checked_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "sim/core/input_error.hpp"

namespace epsim {

namespace {
constexpr std::size_t kBufferBytes = 1 << 16;
}

CheckedFile::CheckedFile(const std::string& path, const std::string& shown_as)
    : shown_as_(shown_as.empty() ? path : shown_as), buffer_(*this), stream_(&buffer_) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("cannot create", errno);
  // Exceptions thrown by the buffer leave the stream through operator<< instead of a silent badbit.
  stream_.exceptions(std::ios::badbit);
}

CheckedFile::CheckedFile(int fd, std::string shown_as)
    : fd_(fd), shown_as_(std::move(shown_as)), buffer_(*this), stream_(&buffer_) {
  stream_.exceptions(std::ios::badbit);
}

CheckedFile::~CheckedFile() {
  if (fd_ >= 0) ::close(fd_);
}

void CheckedFile::fail(const std::string& what, int err) {
  if (first_error_.empty()) first_error_ = what + ": " + std::strerror(err);
  throw InputError(shown_as_, "", first_error_);
}

void CheckedFile::write_all(const char* data, std::size_t n) {
  if (fd_ < 0) throw InputError(shown_as_, "", "write after the file was closed");
  while (n > 0) {
    const ssize_t done = ::write(fd_, data, n);
    if (done < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    data += done;
    n -= static_cast<std::size_t>(done);
  }
}

void CheckedFile::close() {
  if (fd_ < 0) return;
  // A write that failed earlier left the stream bad, and a bad stream's flush() does nothing: report
  // that failure again rather than closing as if all was well.
  if (!first_error_.empty() || !stream_.good())
    throw InputError(shown_as_, "", first_error_.empty() ? "an earlier write failed" : first_error_);
  stream_.flush();  // throws through the stream on a failed write
  // Synced before the file is renamed into place, so a crash cannot leave an empty file under the
  // final name (rename is ordered after the data only if the data reached the disk first).
  if (::fsync(fd_) != 0 && errno != EINVAL) fail("cannot write", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close", errno);
}

CheckedFile::Buffer::Buffer(CheckedFile& file) : file_(file), bytes_(kBufferBytes) {
  setp(bytes_.data(), bytes_.data() + bytes_.size());
}

CheckedFile::Buffer::int_type CheckedFile::Buffer::overflow(int_type ch) {
  sync();
  if (!traits_type::eq_int_type(ch, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(ch);
    pbump(1);
  }
  return traits_type::not_eof(ch);
}

std::streamsize CheckedFile::Buffer::xsputn(const char* s, std::streamsize n) {
  if (n >= static_cast<std::streamsize>(bytes_.size())) {
    sync();
    file_.write_all(s, static_cast<std::size_t>(n));
    return n;
  }
  if (n > epptr() - pptr()) sync();
  std::memcpy(pptr(), s, static_cast<std::size_t>(n));
  pbump(static_cast<int>(n));
  return n;
}

int CheckedFile::Buffer::sync() {
  const std::size_t n = static_cast<std::size_t>(pptr() - pbase());
  // Reset first: if the write throws, the bytes are not written again by a later flush.
  setp(bytes_.data(), bytes_.data() + bytes_.size());
  if (n > 0) file_.write_all(bytes_.data(), n);
  return 0;
}

}  // namespace epsim
