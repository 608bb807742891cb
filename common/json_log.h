// Structured logs: with --log-format json a daemon writes every log line
// as one JSON object (what log collectors such as Loki, Elasticsearch or
// Cloud Logging parse without a pattern):
//
//   {"time":"2026-11-25T03:20:01.123Z","level":"info","process":"autoaccel-server",
//    "message":"job job-...: trial 3 SUCCEEDED 5120 tokens/s","job_id":"job-...",
//    "trial_id":"job-...-t0003"}
//
// job_id, trial_id and rank appear when the logging thread is inside a
// LogContext that names them; "insecure" when the daemon runs unprotected
// (common/listen_policy.h).
//
// Threads: UseJsonLogs is called once at start, before other threads log;
// a LogContext belongs to the thread that made it.
#ifndef AUTOACCEL_COMMON_JSON_LOG_H_
#define AUTOACCEL_COMMON_JSON_LOG_H_

#include <string>

#include "absl/status/status.h"

namespace autoaccel {

// "text" (spdlog's usual lines) or "json"; INVALID_ARGUMENT naming
// --log-format otherwise. For "json", every line from now on is one JSON
// object naming `process` and, when not empty, `insecure_why`.
absl::Status SetLogFormat(const std::string& format, const std::string& process,
                          const std::string& insecure_why);

// A line scripts and tests wait for on stdout ("... listening on HOST:PORT
// ..."): printed as it is, or with --log-format json as the message of a
// JSON log line (on stdout too), so that a log collector reads one format.
void Announce(const std::string& line);

// The ids the lines logged on this thread are about, until it is
// destroyed (then the enclosing context's apply again). Empty ids and a
// negative rank are left out of the lines.
class LogContext {
 public:
  explicit LogContext(std::string job_id, std::string trial_id = "", int rank = -1);
  ~LogContext();
  LogContext(const LogContext&) = delete;
  LogContext& operator=(const LogContext&) = delete;

  const std::string& job_id() const { return job_id_; }
  const std::string& trial_id() const { return trial_id_; }
  int rank() const { return rank_; }

 private:
  std::string job_id_, trial_id_;
  int rank_;
  const LogContext* enclosing_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_JSON_LOG_H_
