// The start both daemons (autoaccel-server, autoaccel-worker) make once
// their flags are parsed, in one place: the log level, the protections each
// port lacks (the common ones — TLS to serve with, a join token — listed by
// MissingProtections, each daemon adding its own), the listen policy over
// its ports (common/listen_policy.h), the logs marked insecure, and the log
// format (common/json_log.h). Call once, on the main thread, before other
// threads log.
#ifndef AUTOACCEL_COMMON_DAEMON_START_H_
#define AUTOACCEL_COMMON_DAEMON_START_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/listen_policy.h"
#include "common/tls_files.h"

namespace autoaccel {

// The protections a daemon's main port lacks, named as their flags, in this
// order: "TLS (--tls-cert/--tls-key)" without a certificate to serve, "user
// tokens (--tokens)" without them (`has_user_tokens`; nullopt for a daemon
// without users, the worker), "a join token (--join-token-file)" without one.
std::vector<std::string> MissingProtections(const TlsFiles& tls,
                                            std::optional<bool> has_user_tokens,
                                            bool has_join_token);

struct DaemonStart {
  std::string daemon;      // "autoaccel-server": names it in messages and JSON logs
  std::string log_level;   // spdlog's: trace, debug, info, warn, error
  std::string log_format;  // "text" or "json"
  std::vector<ListenPort> ports;
  bool insecure = false;  // --insecure
  // Another reason the daemon runs unprotected (the server's open
  // registration), said on every log line; "" for none.
  std::string also_insecure;
};

// Applies `start`: the log level, the listen policy (the first port that may
// not run unprotected is the error, FAILED_PRECONDITION naming what it
// lacks and --insecure), the insecure mark and the log format
// (INVALID_ARGUMENT for an unknown one). Returns what the daemon runs
// without ("" when protected), as every log line then says.
absl::StatusOr<std::string> StartDaemon(const DaemonStart& start);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_DAEMON_START_H_
