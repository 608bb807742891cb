// Time source behind an interface, so that tests can step time
// by hand (LevelDB's Env, reduced to the one call the searchers and the
// coordinator need).
#ifndef AUTOACCEL_COMMON_CLOCK_H_
#define AUTOACCEL_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autoaccel {

class Clock {
 public:
  virtual ~Clock() = default;
  // Current time. Implementations are thread-safe.
  virtual absl::Time Now() const = 0;
};

// The process-wide wall clock (absl::Now()). Never null, never destroyed.
Clock* RealClock();

// A clock that moves only when told to. Thread-safe: one thread may advance it
// while others read it.
class FakeClock : public Clock {
 public:
  // Starts at `start`; the default is an arbitrary fixed instant so that tests
  // are reproducible.
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000));

  absl::Time Now() const override;
  void SetTime(absl::Time t);
  // REQUIRES: d >= absl::ZeroDuration() (a fake clock never runs backwards
  // through Advance; use SetTime for that).
  void Advance(absl::Duration d);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_CLOCK_H_
