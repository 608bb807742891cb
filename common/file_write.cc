#include "common/file_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace autoaccel {

bool WriteWholeFile(const std::string& path, absl::string_view bytes, mode_t mode, bool sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  bool ok = written == bytes.size() && (!sync || ::fsync(fd) == 0);
  const int saved = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok && errno == 0) errno = saved != 0 ? saved : EIO;
  return ok;
}

}  // namespace autoaccel
