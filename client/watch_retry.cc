#include "client/watch_retry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/duration.h"

namespace autoaccel {

bool IsRetryableWatchError(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

ReconnectSchedule::ReconnectSchedule(absl::Duration budget, WatchBackoff backoff, uint64_t seed)
    : budget_(budget), backoff_(backoff), rng_(seed) {}

std::optional<absl::Duration> ReconnectSchedule::Next(absl::Time now) {
  if (attempt_ == 0) lost_at_ = now;
  const absl::Duration left = lost_at_ + budget_ - now;
  if (left <= absl::ZeroDuration()) return std::nullopt;
  ++attempt_;
  absl::Duration base = backoff_.initial;
  for (int i = 1; i < attempt_ && base < backoff_.max; ++i) base *= 2;
  base = std::min(base, backoff_.max);
  std::uniform_real_distribution<double> factor(1 - backoff_.jitter, 1 + backoff_.jitter);
  return std::min(base * factor(rng_), left);
}

grpc::Status FollowWithReconnect(const WatchAttempt& attempt, const std::function<bool()>& terminal,
                                 const ReconnectOptions& options, std::ostream& err) {
  ReconnectSchedule schedule(options.reconnect_for, options.backoff, options.seed);
  bool ever_delivered = false, lost = false;
  for (;;) {
    bool delivered = false;
    grpc::Status s = attempt([&] {
      delivered = true;
      if (lost) {
        err << "autoaccel: reconnected to the coordinator at " << options.server << "\n";
        lost = false;
        schedule.Reset();
      }
    });
    ever_delivered = ever_delivered || delivered;
    if (terminal()) return grpc::Status::OK;
    if (options.reconnect_for <= absl::ZeroDuration() || !ever_delivered) return s;
    if (!s.ok() && !IsRetryableWatchError(s.error_code())) return s;
    const std::string why =
        s.ok() ? "the stream ended before the job did" : std::string(s.error_message());
    std::optional<absl::Duration> delay = schedule.Next(options.now());
    if (!delay) {
      return grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("lost the coordinator (", why, ") and gave up reconnecting after ",
                       autoaccel::FormatDuration(options.reconnect_for), " (--reconnect-for); job ",
                       options.job_id, " may still be running: `autoaccel watch ", options.job_id,
                       "` follows it again"));
    }
    if (options.now() + *delay >= options.deadline) {
      return grpc::Status(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          absl::StrCat("lost the coordinator (", why,
                       ") and --watch-timeout ran out before it could be reached again; job ",
                       options.job_id, " may still be running: `autoaccel watch ", options.job_id,
                       "` follows it again"));
    }
    lost = true;
    err << "autoaccel: lost the coordinator at " << options.server << " (" << why
        << "); reconnecting in " << absl::StrFormat("%.1f s", absl::ToDoubleSeconds(*delay))
        << " (attempt " << schedule.attempt() << ")\n";
    options.sleep(*delay);
  }
}

grpc::ChannelArguments ReconnectChannelArguments() {
  const WatchBackoff backoff;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(backoff.initial)));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(backoff.initial)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(backoff.max)));
  return args;
}

}  // namespace autoaccel
