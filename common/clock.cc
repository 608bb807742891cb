#include "common/clock.h"

#include <cassert>

namespace autoaccel {
namespace {

class RealClockImpl : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* RealClock() {
  static Clock* const clock = new RealClockImpl();  // leaked: usable during shutdown
  return clock;
}

FakeClock::FakeClock(absl::Time start) : now_(start) {}

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::SetTime(absl::Time t) {
  absl::MutexLock lock(&mu_);
  now_ = t;
}

void FakeClock::Advance(absl::Duration d) {
  assert(d >= absl::ZeroDuration());
  absl::MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace autoaccel
