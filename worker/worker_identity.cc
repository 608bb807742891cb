#include "worker/worker_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/secret_token.h"

namespace autoaccel {
namespace {

bool IsKey(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadKey(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InternalError(absl::StrCat("cannot read the identity key ", path));
  std::stringstream text;
  text << in.rdbuf();
  const std::string key(absl::StripAsciiWhitespace(text.str()));
  if (!IsKey(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     " is not an identity key (64 hex digits); remove it to make a new one (the "
                     "coordinator then refuses this id until it restarts)"));
  }
  return key;
}

}  // namespace

std::string IdentityKeyPath(const std::string& work_dir, const std::string& worker_id) {
  std::string name = worker_id;
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      c = '_';
    }
  }
  return absl::StrCat(work_dir, "/identity-", name, ".key");
}

absl::StatusOr<std::string> LoadOrCreateIdentityKey(const std::string& path) {
  if (::access(path.c_str(), F_OK) == 0) return ReadKey(path);
  // Written whole under a temporary name, then linked into place: a worker
  // starting beside this one reads a whole key or none.
  const std::string temporary = absl::StrCat(path, ".", ::getpid(), ".tmp");
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create the identity key ", path, ": ", std::strerror(errno)));
  }
  const std::string key = NewSecretToken();
  const std::string line = key + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  const int linked = written ? ::link(temporary.c_str(), path.c_str()) : -1;
  const int link_errno = errno;
  ::unlink(temporary.c_str());
  if (linked == 0) return key;
  if (written && link_errno == EEXIST) return ReadKey(path);  // another worker was first
  return absl::InternalError(absl::StrCat("cannot write the identity key ", path));
}

}  // namespace autoaccel
