// The clock (common/clock.h): the fake one moves only when told, the real one
// is the wall clock.
#include "absl/time/clock.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace autoaccel {
namespace {

TEST(Clock, FakeClockMovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.SetTime(absl::FromUnixSeconds(50));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(50));
}

TEST(Clock, FakeClockIsThreadSafe) {
  FakeClock clock(absl::UnixEpoch());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&clock] {
      for (int i = 0; i < 1000; ++i) {
        clock.Advance(absl::Milliseconds(1));
        (void)clock.Now();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(clock.Now(), absl::UnixEpoch() + absl::Seconds(4));
}

TEST(Clock, RealClockIsOneWallClock) {
  ASSERT_NE(RealClock(), nullptr);
  EXPECT_EQ(RealClock(), RealClock());
  const absl::Time before = absl::Now();
  const absl::Time now = RealClock()->Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, absl::Now());
}

}  // namespace
}  // namespace autoaccel
