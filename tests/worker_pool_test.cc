#include "server/worker_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "proto/convert.h"
#include "search/step_time.h"
#include "tests/register_request.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

v1::RegisterRequest Worker(const std::string& id, const std::string& address, int devices,
                           int port_min = 0, int port_max = 0) {
  return RegisterRequestFor(id, address, devices, port_min, port_max);
}

std::vector<std::string> Holders(const WorkerPool& pool, const std::string& worker) {
  for (const v1::Worker& w : pool.List()) {
    if (w.worker_id() != worker) continue;
    std::vector<std::string> out;
    for (const v1::Device& d : w.devices()) out.push_back(d.held_by_trial());
    return out;
  }
  return {};
}

TEST(HostOfAddressTest, StripsThePortOfHostsAndBracketedIpv6) {
  EXPECT_EQ(HostOfAddress("10.0.0.7:50052"), "10.0.0.7");
  EXPECT_EQ(HostOfAddress("node-3.cluster:1"), "node-3.cluster");
  EXPECT_EQ(HostOfAddress("[::1]:50052"), "::1");
  EXPECT_EQ(HostOfAddress("[fe80::1%eth0]:7"), "fe80::1%eth0");
  EXPECT_EQ(HostOfAddress("node-3"), "node-3");
  EXPECT_EQ(HostOfAddress("::1"), "::1");
}

TEST(WorkerPoolTest, AGangIsPlacedWholeOnTheFewestWorkersAndReleasedRankByRank) {
  FakeClock clock;
  WorkerPool pool(&clock);
  ASSERT_TRUE(pool.Register(Worker("big", "h1:1", 4)).ok());
  ASSERT_TRUE(pool.Register(Worker("small", "h2:1", 2, 7000, 7001)).ok());
  EXPECT_EQ(pool.CountDevices("cpu"), 6);
  EXPECT_EQ(pool.CountDevices("cuda"), 0);
  // Two ranks fit on the smaller worker: the bigger hole stays free.
  std::optional<Gang> gang = pool.Place("cpu", 2, "t1", 1);
  ASSERT_TRUE(gang.has_value());
  EXPECT_EQ(gang->ranks[0].worker_id, "small");
  EXPECT_EQ(gang->ranks[1].local_rank, 1);
  EXPECT_EQ(gang->master_host, "h2");
  EXPECT_EQ(gang->master_port, 7000);
  EXPECT_THAT(Holders(pool, "small"), ElementsAre("t1", "t1"));
  // All or nothing: five more devices are not free.
  EXPECT_FALSE(pool.Place("cpu", 5, "t2", 1).has_value());
  EXPECT_THAT(Holders(pool, "big"), ElementsAre("", "", "", ""));
  pool.Release("t1", 1, 0);
  pool.Release("t1", 1, 0);  // idempotent
  EXPECT_THAT(Holders(pool, "small"), ElementsAre("", "t1"));
  pool.Release("t1", 1, 1);
  // The port is free again, unless a trial failed on it.
  pool.QuarantinePort("h2", 7000, clock.Now() + absl::Minutes(10));
  gang = pool.Place("cpu", 2, "t3", 1);
  ASSERT_TRUE(gang.has_value());
  EXPECT_EQ(gang->master_port, 7001);
}

TEST(WorkerPoolTest, ASilentWorkerIsLostUntilItHeartbeatsAndAStrangerMustRegister) {
  FakeClock clock;
  WorkerPool pool(&clock);
  absl::StatusOr<std::string> token = pool.Register(Worker("a", "h1:1", 1));
  ASSERT_TRUE(token.ok());
  clock.Advance(absl::Seconds(11));
  std::vector<LostWorker> lost = pool.ExpireSilent(absl::Seconds(10));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker_id, "a");
  EXPECT_EQ(lost[0].silent, absl::Seconds(11));
  EXPECT_TRUE(pool.ExpireSilent(absl::Seconds(10)).empty()) << "declared lost once";
  EXPECT_EQ(pool.CountDevices("cpu"), 0);
  EXPECT_FALSE(pool.Place("cpu", 1, "t1", 1).has_value());
  EXPECT_EQ(*pool.Heartbeat("a", *token), true) << "back";
  EXPECT_EQ(*pool.Heartbeat("a", *token), false);
  EXPECT_TRUE(pool.Place("cpu", 1, "t1", 1).has_value());
  EXPECT_EQ(pool.Heartbeat("stranger", *token).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool.Register(Worker("b", "h1:2", 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Register(Worker("b", "h1:2", 1, 9, 8)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WorkerPoolTest, AWorkerThatLeavesIsNeverPlacedAgainAndGoneOnceItsRanksAnswered) {
  FakeClock clock;
  WorkerPool pool(&clock);
  absl::StatusOr<std::string> a = pool.Register(Worker("a", "h1:1", 2));
  absl::StatusOr<std::string> b = pool.Register(Worker("b", "h2:1", 1));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(pool.Place("cpu", 1, "t1", 1).has_value());  // on b, the smaller hole
  EXPECT_EQ(pool.Leave("b", *a).code(), absl::StatusCode::kPermissionDenied) << "a's token";
  EXPECT_EQ(pool.Leave("nobody", *b).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(pool.Leave("b", *b).ok());
  EXPECT_EQ(pool.Heartbeat("b", *b).status().code(), absl::StatusCode::kNotFound)
      << "a worker that left cannot come back by heartbeat, only by registering";
  // Its rank is still in flight: not listed, not placed, not lost.
  std::vector<std::string> listed;
  for (const v1::Worker& w : pool.List()) listed.push_back(w.worker_id());
  EXPECT_THAT(listed, ElementsAre("a"));
  EXPECT_EQ(pool.Census().workers_lost, 0);
  EXPECT_EQ(pool.CountDevices("cpu"), 2);
  clock.Advance(absl::Minutes(5));
  ASSERT_TRUE(pool.Heartbeat("a", *a).ok());
  EXPECT_TRUE(pool.ExpireSilent(absl::Seconds(10)).empty()) << "a worker that left is not lost";
  pool.Release("t1", 1, 0);
  EXPECT_EQ(pool.Heartbeat("b", *b).status().code(), absl::StatusCode::kNotFound) << "forgotten";
  // With nothing in flight it is gone at once; its id may register anew.
  ASSERT_TRUE(pool.Leave("a", *a).ok());
  EXPECT_TRUE(pool.List().empty());
  EXPECT_TRUE(pool.Register(Worker("a", "h1:1", 2)).ok());
  EXPECT_EQ(pool.List().size(), 1u);
}

TEST(WorkerPoolTest, ThePoolsTimingJitterIsItsNoisiestUsableWorkersOfTheType) {
  FakeClock clock;
  WorkerPool pool(&clock);
  v1::RegisterRequest a = Worker("a", "h1:1", 1);
  a.set_timing_jitter(0.02);
  v1::RegisterRequest b = Worker("b", "h2:1", 1);
  b.set_timing_jitter(std::nan(""));  // not plausible: not kept
  absl::StatusOr<std::string> a_token = pool.Register(a);
  absl::StatusOr<std::string> b_token = pool.Register(b);
  ASSERT_TRUE(a_token.ok() && b_token.ok());
  EXPECT_EQ(pool.TimingJitter("cpu"), std::make_pair(0.02, std::string("a")));
  EXPECT_EQ(pool.TimingJitter("cuda"), std::make_pair(0.0, std::string()));
  ASSERT_TRUE(pool.Heartbeat("b", *b_token, 0.15).ok());  // measured again while idle
  ASSERT_TRUE(pool.Heartbeat("a", *a_token, -1).ok());    // not plausible: ignored
  EXPECT_EQ(pool.TimingJitter("cpu"), std::make_pair(0.15, std::string("b")));
  EXPECT_DOUBLE_EQ(pool.List()[0].timing_jitter(), 0.02);
  clock.Advance(absl::Seconds(11));
  ASSERT_EQ(pool.ExpireSilent(absl::Seconds(10)).size(), 2u);
  EXPECT_EQ(pool.TimingJitter("cpu").first, 0) << "only usable workers count";
}

// A GPU the device catalog knows brings its memory bandwidth and links to the
// cost model, with the worker's GPUs as one node; an unknown GPU and a cpu
// device leave them unknown.
TEST(WorkerPoolTest, AKnownGpuBringsTheCatalogsLinksAndTheWorkerIsItsNode) {
  FakeClock clock;
  WorkerPool pool(&clock);
  v1::RegisterRequest h100 = Worker("h100s", "h1:1", 0);
  for (int i = 0; i < 8; ++i) {
    v1::Device* d = h100.add_devices();
    d->set_type("cuda");
    d->set_index(i);
    d->set_name("NVIDIA H100 80GB HBM3");
    d->set_memory_bytes(int64_t{80} << 30);
  }
  ASSERT_TRUE(pool.Register(h100).ok());
  const DeviceSpec cuda = pool.DeviceSpecFor("cuda");
  EXPECT_EQ(cuda.memory_bytes, int64_t{80} << 30) << "the worker's figure, not the catalog's";
  EXPECT_EQ(cuda.devices_per_node, 8);
  EXPECT_GT(cuda.memory_bandwidth_bytes_per_s, 1e12);
  EXPECT_GT(cuda.intra_node.bandwidth_bytes_per_s, cuda.inter_node.bandwidth_bytes_per_s);
  EXPECT_GT(cuda.inter_node.bandwidth_bytes_per_s, 0);

  FakeClock clock2;
  WorkerPool other(&clock2);
  v1::RegisterRequest unknown = Worker("mystery", "h2:1", 1);
  unknown.mutable_devices(0)->set_type("cuda");
  unknown.mutable_devices(0)->set_name("Some Future GPU");
  ASSERT_TRUE(other.Register(unknown).ok());
  EXPECT_EQ(other.DeviceSpecFor("cuda").devices_per_node, 0);
  EXPECT_EQ(other.DeviceSpecFor("cuda").intra_node.bandwidth_bytes_per_s, 0);
  EXPECT_EQ(pool.DeviceSpecFor("cpu").devices_per_node, 0);
}

// fp8 is judged over every device of the type: one GPU without fp8 tensor
// cores in the pool takes fp8 away (a trial may land on it).
TEST(WorkerPoolTest, OneDeviceWithoutFp8TakesFp8FromThePool) {
  FakeClock clock;
  WorkerPool pool(&clock);
  v1::RegisterRequest h100 = Worker("a-h100", "h1:1", 1);
  h100.mutable_devices(0)->set_type("cuda");
  *h100.mutable_devices(0)->mutable_peak_tflops() = ToProto(PeakTflops{67, 989, 989, 1979});
  ASSERT_TRUE(pool.Register(h100).ok());
  EXPECT_EQ(pool.DeviceSpecFor("cuda").peak.fp8, 1979);
  v1::RegisterRequest a100 = Worker("b-a100", "h2:1", 1);
  a100.mutable_devices(0)->set_type("cuda");
  *a100.mutable_devices(0)->mutable_peak_tflops() = ToProto(PeakTflops{19.5, 312, 312, 0});
  ASSERT_TRUE(pool.Register(a100).ok());
  EXPECT_EQ(pool.DeviceSpecFor("cuda").peak.fp8, 0);
  TrainingSetup facts;
  SetDeviceFacts(pool.DeviceSpecFor("cuda"), &facts);
  EXPECT_FALSE(facts.device_supports_fp8);
  EXPECT_TRUE(facts.device_supports_bf16);
}

// A worker's id belongs to the key it first registered with: once it is
// lost (or left, or forgotten), another process holding the join token
// cannot register that id, and the worker itself, with its key, can.
TEST(WorkerPoolTest, ALostWorkersIdIsNotTakenOverWithoutItsIdentityKey) {
  FakeClock clock;
  WorkerPool pool(&clock);
  v1::RegisterRequest real = Worker("w1", "h1:1", 1);
  real.set_identity_key(std::string(64, 'a'));
  ASSERT_TRUE(pool.Register(real).ok());
  clock.Advance(absl::Seconds(60));
  ASSERT_EQ(pool.ExpireSilent(absl::Seconds(10)).size(), 1u);
  v1::RegisterRequest thief = Worker("w1", "evil:1", 1);
  thief.set_identity_key(std::string(64, 'b'));
  absl::StatusOr<std::string> taken = pool.Register(thief);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(taken.status().message()), HasSubstr("belongs to another worker"));
  thief.clear_identity_key();
  EXPECT_EQ(pool.Register(thief).status().code(), absl::StatusCode::kPermissionDenied)
      << "no key: no takeover either";
  // Forgotten, it stays bound.
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(pool.ForgetSilent(absl::Minutes(10)).size(), 1u);
  thief.set_identity_key(std::string(64, 'b'));
  EXPECT_EQ(pool.Register(thief).status().code(), absl::StatusCode::kPermissionDenied);
  // The real worker comes back.
  ASSERT_TRUE(pool.Register(real).ok());
  EXPECT_EQ(pool.List().at(0).address(), "h1:1");
  // A worker without a key binds nothing (tests, older workers).
  ASSERT_TRUE(pool.Register(Worker("keyless", "h2:1", 1)).ok());
  clock.Advance(absl::Seconds(60));
  pool.ExpireSilent(absl::Seconds(10));
  v1::RegisterRequest other = Worker("keyless", "h3:1", 1);
  other.set_identity_key(std::string(64, 'c'));
  EXPECT_TRUE(pool.Register(other).ok());
}

TEST(WorkerPoolTest, ADistrustedWorkerIsNeitherPlacedNorCountedAndSaysWhy) {
  FakeClock clock;
  WorkerPool pool(&clock);
  ASSERT_TRUE(pool.Register(Worker("a", "h1:1", 1)).ok());
  ASSERT_TRUE(pool.Register(Worker("b", "h2:1", 1)).ok());
  EXPECT_EQ(pool.CountWorkers("cpu"), 2);
  pool.Distrust("a", "impossible measurement: x", absl::Hours(24));
  EXPECT_EQ(pool.CountWorkers("cpu"), 1);
  for (int i = 0; i < 3; ++i) {
    std::optional<Gang> g = pool.Place("cpu", 1, "t" + std::to_string(i), 1);
    ASSERT_TRUE(g.has_value());
    EXPECT_EQ(g->ranks[0].worker_id, "b");
    pool.Release("t" + std::to_string(i), 1, 0);
  }
  for (const v1::Worker& w : pool.List()) {
    if (w.worker_id() == "a") {
      EXPECT_THAT(w.warnings(), Contains(HasSubstr("its figures cannot be true: impossible")));
    }
  }
  clock.Advance(absl::Hours(25));
  EXPECT_EQ(pool.CountWorkers("cpu"), 2) << "the quarantine ends";
}

TEST(WorkerPoolTest, ARepeatIsPlacedAwayFromTheWorkersItRepeatsWhereThePoolCan) {
  FakeClock clock;
  WorkerPool pool(&clock);
  ASSERT_TRUE(pool.Register(Worker("a", "h1:1", 1)).ok());
  ASSERT_TRUE(pool.Register(Worker("b", "h2:1", 1)).ok());
  std::optional<Gang> g = pool.Place("cpu", 1, "t1", 1, "", {"a"});
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->ranks[0].worker_id, "b");
  // b busy: the repeat waits for b rather than run on a.
  EXPECT_FALSE(pool.Place("cpu", 1, "t2", 1, "", {"a"}).has_value());
  // A gang only both can hold goes anywhere.
  pool.Release("t1", 1, 0);
  EXPECT_TRUE(pool.Place("cpu", 2, "t3", 1, "", {"a"}).has_value());
}

// What the measurement check bounds a rank's figures by: a GPU the catalog
// names brings the datasheet's peak (whatever the worker claims), a cpu slot
// its registered peak and its host's memory.
TEST(WorkerPoolTest, ADevicesCeilingIsTheCatalogsPeakForAKnownGpuElseTheRegisteredOne) {
  FakeClock clock;
  WorkerPool pool(&clock);
  v1::RegisterRequest gpu = Worker("g", "h1:1", 0);
  v1::Device* d = gpu.add_devices();
  d->set_type("cuda");
  d->set_name("NVIDIA H100 80GB HBM3");
  d->set_memory_bytes(int64_t{80} << 30);
  d->mutable_peak_tflops()->set_bf16(90000);  // a claim far above any datasheet
  ASSERT_TRUE(pool.Register(gpu).ok());
  const WorkerPool::DeviceCeiling h100 = pool.CeilingOf("g", 0);
  EXPECT_TRUE(h100.peak_from_catalog);
  EXPECT_GT(h100.peak_flops, 500e12);
  EXPECT_LT(h100.peak_flops, 5000e12) << "the catalog's, not the claim";
  EXPECT_EQ(h100.memory_bytes, int64_t{80} << 30);

  v1::RegisterRequest cpu = Worker("c", "h2:1", 1);
  cpu.mutable_devices(0)->mutable_peak_tflops()->set_fp32(0.1);
  cpu.mutable_devices(0)->mutable_peak_tflops()->set_bf16(0.4);
  cpu.set_host_memory_bytes(int64_t{64} << 30);
  ASSERT_TRUE(pool.Register(cpu).ok());
  const WorkerPool::DeviceCeiling slot = pool.CeilingOf("c", 0);
  EXPECT_FALSE(slot.peak_from_catalog);
  EXPECT_DOUBLE_EQ(slot.peak_flops, 0.4e12);
  EXPECT_EQ(slot.memory_bytes, int64_t{64} << 30) << "a cpu slot may use its host's memory";
  EXPECT_EQ(pool.CeilingOf("nobody", 0).peak_flops, 0);
}

}  // namespace
}  // namespace autoaccel
