#include "common/local_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace autoaccel {
namespace {

std::string Unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  const std::string h = Unbracketed(host);
  if (absl::AsciiStrToLower(h) == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, h.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& host) {
  const std::string name = Unbracketed(host);
  if (name.empty()) return absl::InvalidArgumentError("host: empty");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  // Any port: connecting a datagram socket only picks the route.
  if (int rc = ::getaddrinfo(name.c_str(), "9", &hints, &found); rc != 0 || found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("host ", host, " does not resolve: ", ::gai_strerror(rc)));
  }
  const int fd = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    ::freeaddrinfo(found);
    return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(err)));
  }
  const int connected = ::connect(fd, found->ai_addr, found->ai_addrlen);
  const int connect_errno = errno;
  ::freeaddrinfo(found);
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  if (connected != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    const int err = connected != 0 ? connect_errno : errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("no route to ", host, " from this host: ", std::strerror(err)));
  }
  ::close(fd);
  char text[INET6_ADDRSTRLEN] = {};
  const void* bytes =
      local.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
  if (::inet_ntop(local.ss_family, bytes, text, sizeof(text)) == nullptr) {
    return absl::UnavailableError(absl::StrCat("inet_ntop: ", std::strerror(errno)));
  }
  return std::string(text);
}

}  // namespace autoaccel
