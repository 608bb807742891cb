// How `autoaccel tune` and `autoaccel watch` follow a job across a lost
// coordinator (a restart, a network blip): the stream is opened again with
// exponential backoff (0.5 s doubling to 10 s, each delay jittered) for at
// most --reconnect-for after it was lost, saying so on stderr. Only a stream
// that was lost is retried: one that never delivered an event (a wrong
// --server, a job id the server does not know) fails at once, and so does an
// error that a retry cannot fix (IsRetryableWatchError). Pure logic, no
// threads of its own; the caller's thread only.
#ifndef AUTOACCEL_CLIENT_WATCH_RETRY_H_
#define AUTOACCEL_CLIENT_WATCH_RETRY_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <random>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace autoaccel {

// --reconnect-for: how long after the stream was lost to keep trying.
inline constexpr absl::Duration kDefaultReconnectFor = absl::Minutes(5);

struct WatchBackoff {
  absl::Duration initial = absl::Milliseconds(500);
  absl::Duration max = absl::Seconds(10);
  // Each delay is scaled by a factor drawn uniformly from [1 - jitter,
  // 1 + jitter] (so that many watchers of one coordinator do not return
  // in step).
  double jitter = 0.2;
};

// Whether a watch stream that ended with `code` may succeed when opened
// again: UNAVAILABLE (the coordinator is gone or restarting), ABORTED and
// CANCELLED (a coordinator shutting down cancels its streams). Never
// UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT,
// RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED (--watch-timeout ran out).
bool IsRetryableWatchError(grpc::StatusCode code);

// The delays between attempts after one loss of the stream.
class ReconnectSchedule {
 public:
  // `budget`: how long after the loss to keep trying (0: never).
  ReconnectSchedule(absl::Duration budget, WatchBackoff backoff, uint64_t seed);

  // The stream was lost (again) at `now`: the delay before the next attempt,
  // never past the loss + budget; nullopt once the budget is spent. The
  // first call after Reset() starts the budget.
  std::optional<absl::Duration> Next(absl::Time now);
  // The attempt that Next() last scheduled, from 1.
  int attempt() const { return attempt_; }
  // The stream delivered again: the next loss starts a fresh schedule.
  void Reset() { attempt_ = 0; }

 private:
  absl::Duration budget_;
  WatchBackoff backoff_;
  std::mt19937_64 rng_;
  int attempt_ = 0;
  absl::Time lost_at_;
};

// One attempt to follow the stream: opens it, calls `delivered()` for each
// event it reads and returns the stream's status when it ends.
using WatchAttempt = std::function<grpc::Status(const std::function<void()>& delivered)>;

struct ReconnectOptions {
  absl::Duration reconnect_for = kDefaultReconnectFor;
  WatchBackoff backoff;
  uint64_t seed = std::random_device()();
  std::string server;  // for messages
  std::string job_id;  // for messages
  // --watch-timeout: no wait for a reconnect reaches past it.
  absl::Time deadline = absl::InfiniteFuture();
  std::function<absl::Time()> now = [] { return absl::Now(); };
  std::function<void(absl::Duration)> sleep = [](absl::Duration d) { absl::SleepFor(d); };
};

// Runs `attempt` until one ends with `terminal()` true (returns OK). A lost
// stream (a retryable error, or OK while the job is not terminal, after at
// least one event) is opened again per ReconnectSchedule, with one line on
// `err` per retry ("lost the coordinator ...; reconnecting in 2.0 s (attempt
// 3)") and one when events flow again ("reconnected ..."). Returns the
// attempt's status for an error no retry can fix or a stream that never
// delivered; UNAVAILABLE saying that it gave up once the budget is spent;
// DEADLINE_EXCEEDED when the next attempt would come after `deadline`; with
// reconnect_for 0, the first attempt's status as it is.
grpc::Status FollowWithReconnect(const WatchAttempt& attempt, const std::function<bool()>& terminal,
                                 const ReconnectOptions& options, std::ostream& err);

// Channel arguments that let the channel itself try the coordinator again as
// often as FollowWithReconnect does (gRPC's own default backs off to 120 s,
// which would leave a reconnected coordinator unseen for minutes).
grpc::ChannelArguments ReconnectChannelArguments();

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_WATCH_RETRY_H_
