// When a daemon may serve without TLS and tokens. On loopback (127.0.0.0/8,
// ::1, localhost) nothing is required: a laptop needs no certificates. On
// any other address, autoaccel-server and autoaccel-worker refuse to start
// without TLS and tokens unless --insecure is given (the coordinator's HTTP
// port as its gRPC port: HTTPS and user tokens), and an insecure daemon
// says so on every log line (and in `autoaccel workers`).
#ifndef AUTOACCEL_COMMON_LISTEN_POLICY_H_
#define AUTOACCEL_COMMON_LISTEN_POLICY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace autoaccel {

// Whether the host of "HOST:PORT" ("[::1]:PORT" for IPv6) is a loopback
// address or "localhost". An empty host, 0.0.0.0, [::] and every other
// name or address are not.
bool IsLoopbackListen(const std::string& listen);

// What a daemon about to listen on `listen` lacks for serving safely:
// `missing` names each absent protection as its flag ("--tls-cert/--tls-key",
// "--tokens", ...). OK on loopback, when nothing is missing, or with
// `insecure` (ApplyListenPolicy then marks the logs). Otherwise
// FAILED_PRECONDITION naming `daemon`, the address, what is missing and
// --insecure.
absl::Status CheckListenPolicy(const std::string& daemon, const std::string& listen,
                               const std::vector<std::string>& missing, bool insecure);

// One port a daemon listens on and the protections it lacks there; `port`
// names it in messages ("" for the daemon's main port, "HTTP port").
struct ListenPort {
  std::string listen;
  std::vector<std::string> missing;
  std::string port;
};

// CheckListenPolicy for every port of `ports` (the first one that may not
// run unprotected is the error); then, for a daemon let through unprotected
// by `insecure`, what it lacks ("no TLS (...), no a join token (...); HTTP
// port: no TLS (...)"), after prefixing every later spdlog line with
// "[INSECURE: <that>]"; "" for a protected daemon. Call once at start
// (common/daemon_start.h does), before other threads log.
absl::StatusOr<std::string> ApplyListenPolicy(const std::string& daemon,
                                              const std::vector<ListenPort>& ports, bool insecure);

// Prefixes every later spdlog line with "[INSECURE: <why>]" (what
// ApplyListenPolicy does for an unprotected port; a daemon unprotected for
// another reason calls it itself). Call before other threads log.
void MarkLogsInsecure(const std::string& why);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_LISTEN_POLICY_H_
