// The search algorithms (search/searcher.h) against a simulated device whose
// speed and memory the cost model only roughly knows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "search/cost_model.h"
#include "search/searcher.h"
#include "search/space.h"
#include "spec/strategy_fields.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

ModelSpec SmallGpt() {
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("gpt2", nlohmann::json{{"n_layer", 4},
                                                                         {"n_embd", 256},
                                                                         {"n_head", 4},
                                                                         {"vocab_size", 8192},
                                                                         {"n_positions", 256}});
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

DeviceSpec Device(int64_t memory_bytes) {
  DeviceSpec d;
  d.type = "cuda";
  d.peak.fp32 = 60;
  d.peak.bf16 = 900;
  d.peak.fp16 = 900;
  d.memory_bytes = memory_bytes;
  return d;
}

std::vector<Strategy> Space(int world_size) {
  SpaceRequest r;
  r.model = SmallGpt();
  r.seq_len = 256;
  r.global_batch_size = 32;
  r.world_size = world_size;
  r.device_is_accelerator = true;
  r.precisions = {Precision::kBf16, Precision::kFp32};
  r.checkpointings = {Checkpointing::kNone, Checkpointing::kFull};
  r.checkpoint_percents = {100};
  r.offloads = {Offload::kNone};
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(r);
  EXPECT_TRUE(space.ok()) << space.status();
  return space.value_or(std::vector<Strategy>{});
}

// The "real" device: the cost model's prior, distorted per dimension in ways
// the model does not know (bf16 slower than its peak, math attention and
// unfused optimizers dearer, sharding cheaper), with 3% of deterministic
// noise; memory 25% above the model's estimate plus 100 MiB. Trials above
// the device memory run out of it.
class SimulatedDevice {
 public:
  SimulatedDevice(int64_t memory_bytes) : memory_bytes_(memory_bytes), model_(Model(0)) {}

  CostModel Model(int64_t memory) const {
    return CostModel(SmallGpt(), 256, 32, Device(memory > 0 ? memory : memory_bytes_));
  }

  ScoredTrial Run(const Strategy& s) const {
    ScoredTrial t;
    t.strategy = s;
    const CostModel::Prediction p = model_.Predict(s);
    t.metrics.peak_memory_bytes = static_cast<int64_t>(1.25 * p.memory.total()) + 100 * kMiB;
    if (t.metrics.peak_memory_bytes > memory_bytes_) {
      t.status = TrialStatus::kOom;
      return t;
    }
    double tps = p.tokens_per_second;
    if (UsesBf16(s.precision)) tps *= 0.6;
    if (s.attention == Attention::kMath) tps *= 0.8;
    if (s.optimizer == Optimizer::kAdamW) tps *= 0.93;
    if (s.sharding == Sharding::kZero1) tps *= 1.05;
    tps *= 1 + 0.03 * (static_cast<double>(Fnv1a64(StrategyToText(s)) % 2001) / 1000 - 1);
    t.status = TrialStatus::kSucceeded;
    t.metrics.tokens_per_second = tps;
    t.metrics.step_time_median_s = 256.0 * 32 / tps;
    t.metrics.step_time_min_s = t.metrics.step_time_max_s = t.metrics.step_time_median_s;
    t.metrics.measured_steps = 5;
    return t;
  }

  double BestOf(const std::vector<Strategy>& space) const {
    double best = 0;
    for (const Strategy& s : space) {
      const ScoredTrial t = Run(s);
      if (t.status == TrialStatus::kSucceeded) best = std::max(best, t.metrics.tokens_per_second);
    }
    return best;
  }

 private:
  int64_t memory_bytes_;
  CostModel model_;
};

struct Outcome {
  int trials = 0;
  int pruned = 0;
  double best = 0;  // the answer's throughput on the simulated device
  std::vector<PrunedStrategy> pruned_list;
};

// Drives a searcher to its end with `parallel` trials in flight, reporting
// the oldest first.
Outcome Drive(SearchAlgorithm algorithm, const std::vector<Strategy>& space,
              const SimulatedDevice& device, int max_trials, int parallel = 1) {
  SearchSetup setup;
  setup.algorithm = algorithm;
  setup.candidates = space;
  setup.cost_model = device.Model(0);
  setup.budget.max_trials = max_trials;
  setup.parallel_trials = parallel;
  absl::StatusOr<std::unique_ptr<Searcher>> created = CreateSearcher(std::move(setup));
  EXPECT_TRUE(created.ok()) << created.status();
  Outcome out;
  if (!created.ok()) return out;
  Searcher& searcher = **created;
  std::vector<ScoredTrial> in_flight;
  std::set<std::string> pruned_texts;
  const auto take_pruned = [&] {
    for (PrunedStrategy& p : searcher.TakePruned()) {
      EXPECT_TRUE(pruned_texts.insert(StrategyToText(p.strategy)).second) << "pruned twice";
      out.pruned_list.push_back(std::move(p));
    }
  };
  take_pruned();
  while (true) {
    while (static_cast<int>(in_flight.size()) < parallel) {
      std::optional<Proposal> p = searcher.Next();
      if (!p) break;
      EXPECT_EQ(pruned_texts.count(StrategyToText(p->strategy)), 0u) << "proposed a pruned one";
      in_flight.push_back(device.Run(p->strategy));
      ++out.trials;
    }
    if (in_flight.empty()) break;
    searcher.Report(in_flight.front());
    in_flight.erase(in_flight.begin());
    take_pruned();
  }
  EXPECT_TRUE(searcher.Finished());
  out.pruned = static_cast<int>(out.pruned_list.size());
  if (std::optional<ScoredTrial> best = searcher.Best()) {
    out.best = device.Run(best->strategy).metrics.tokens_per_second;
  }
  return out;
}

TEST(Searchers, ModelBasedSearchesFindNearlyTheBestInAQuarterOfTheTrials) {
  const std::vector<Strategy> space = Space(2);
  ASSERT_GT(space.size(), 200u);
  const SimulatedDevice device(2048 * kMiB);
  const double best = device.BestOf(space);
  const int budget = static_cast<int>(space.size() / 4);
  for (SearchAlgorithm a :
       {SearchAlgorithm::kGreedy, SearchAlgorithm::kBayes, SearchAlgorithm::kAuto}) {
    const Outcome o = Drive(a, space, device, budget);
    EXPECT_LE(o.trials, budget) << SearchAlgorithmName(a);
    EXPECT_GE(o.best, 0.97 * best) << SearchAlgorithmName(a) << " after " << o.trials;
  }
}

TEST(Searchers, ParallelProposalsAreDistinctAndStillFindTheBest) {
  const std::vector<Strategy> space = Space(2);
  const SimulatedDevice device(2048 * kMiB);
  const double best = device.BestOf(space);
  for (SearchAlgorithm a : {SearchAlgorithm::kBayes, SearchAlgorithm::kGreedy}) {
    SearchSetup setup;
    setup.algorithm = a;
    setup.candidates = space;
    setup.cost_model = device.Model(0);
    absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
    ASSERT_TRUE(s.ok()) << s.status();
    std::set<std::string> proposed;
    for (int i = 0; i < 4; ++i) {
      std::optional<Proposal> p = (*s)->Next();
      ASSERT_TRUE(p.has_value()) << SearchAlgorithmName(a) << " " << i;
      EXPECT_TRUE(proposed.insert(StrategyToText(p->strategy)).second);
    }
    const Outcome o = Drive(a, space, device, static_cast<int>(space.size() / 4), /*parallel=*/4);
    EXPECT_GE(o.best, 0.97 * best) << SearchAlgorithmName(a);
  }
}

TEST(Searchers, StrategiesPredictedNotToFitArePrunedWithTheirReason) {
  const std::vector<Strategy> space = Space(1);
  // A device too small for the biggest micro-batches without recompute.
  const SimulatedDevice device(300 * kMiB);
  const Outcome o = Drive(SearchAlgorithm::kExhaustive, space, device, 0);
  ASSERT_GT(o.pruned, 0);
  EXPECT_EQ(o.trials + o.pruned, static_cast<int>(space.size()));
  bool predicted = false;
  for (const PrunedStrategy& p : o.pruned_list) {
    predicted |= absl::StrContains(p.reason, "exceeds");
  }
  EXPECT_TRUE(predicted) << o.pruned_list.front().reason;
  // What was pruned by prediction really needs more than the device has
  // (the simulated device needs more than the model predicts).
  for (const PrunedStrategy& p : o.pruned_list) {
    EXPECT_EQ(device.Run(p.strategy).status, TrialStatus::kOom) << StrategyToText(p.strategy);
  }
}

TEST(Searchers, AnOutOfMemoryPrunesEveryStrategyThatNeedsAtLeastAsMuch) {
  Strategy small;
  small.micro_batch_size = 2;
  small.grad_accum_steps = 8;
  small.precision = Precision::kBf16;
  small.checkpointing = Checkpointing::kFull;
  Strategy big = small;
  big.micro_batch_size = 4;
  big.grad_accum_steps = 4;
  Strategy bigger_no_recompute = big;
  bigger_no_recompute.checkpointing = Checkpointing::kNone;
  Strategy other_precision = big;
  other_precision.precision = Precision::kFp32;
  std::vector<Strategy> space = {big, small, bigger_no_recompute, other_precision};

  absl::StatusOr<std::unique_ptr<Searcher>> s =
      CreateExhaustiveSearcher(space, SearchBudget{}, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  std::optional<Proposal> first = (*s)->Next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->strategy, big);
  ScoredTrial oom;
  oom.strategy = big;
  oom.status = TrialStatus::kOom;
  (*s)->Report(oom);
  const std::vector<PrunedStrategy> pruned = (*s)->TakePruned();
  ASSERT_EQ(pruned.size(), 1u);
  EXPECT_EQ(pruned[0].strategy, bigger_no_recompute);
  EXPECT_THAT(pruned[0].reason, HasSubstr("ran out of memory"));
  EXPECT_THAT(pruned[0].reason, HasSubstr(StrategyToText(big)));
  std::vector<Strategy> rest;
  while (std::optional<Proposal> p = (*s)->Next()) rest.push_back(p->strategy);
  EXPECT_THAT(rest, ::testing::ElementsAre(small, other_precision));
}

TEST(Searchers, MemoryOrderAlongTheMonotoneDimensions) {
  Strategy a;
  a.data_parallel = 2;
  a.sharding = Sharding::kZero2;
  a.micro_batch_size = 2;
  a.checkpointing = Checkpointing::kSelective;
  a.checkpoint_percent = 50;
  EXPECT_TRUE(NeedsAtLeastAsMuchMemory(a, a));
  Strategy b = a;
  b.micro_batch_size = 4;
  b.grad_accum_steps = 2;
  EXPECT_TRUE(NeedsAtLeastAsMuchMemory(b, a));
  EXPECT_FALSE(NeedsAtLeastAsMuchMemory(a, b));
  b = a;
  b.sharding = Sharding::kZero1;
  EXPECT_TRUE(NeedsAtLeastAsMuchMemory(b, a));
  b.sharding = Sharding::kFsdp;
  EXPECT_FALSE(NeedsAtLeastAsMuchMemory(b, a));
  b = a;
  b.checkpointing = Checkpointing::kNone;
  b.checkpoint_percent = 100;
  EXPECT_TRUE(NeedsAtLeastAsMuchMemory(b, a));
  b = a;
  b.checkpoint_percent = 100;  // selective on more layers saves more
  EXPECT_FALSE(NeedsAtLeastAsMuchMemory(b, a));
  EXPECT_TRUE(NeedsAtLeastAsMuchMemory(a, b));
  b = a;
  b.checkpointing = Checkpointing::kFull;  // full on the same layers saves more
  EXPECT_TRUE(NeedsAtLeastAsMuchMemory(a, b));
  b = a;
  b.precision = Precision::kBf16;  // not a monotone dimension
  EXPECT_FALSE(NeedsAtLeastAsMuchMemory(b, a));
  EXPECT_FALSE(NeedsAtLeastAsMuchMemory(a, b));
  EXPECT_EQ(StrategyDistance(a, b), 1);
  b.micro_batch_size = 8;
  b.grad_accum_steps = 4;  // follows the micro-batch: not a dimension of its own
  EXPECT_EQ(StrategyDistance(a, b), 2);
}

// A new strategy field must count in the distance (greedy's neighbours,
// the report's), else two strategies that differ only there look the same.
TEST(Searchers, StrategiesThatDifferInOneFieldAreAtDistanceOne) {
  int pairs = 0;
  ForEveryFieldValue([&](const auto& field, const Strategy& a) {
    // grad_accum_steps follows the micro-batch size; it is no dimension.
    if (field.name == "grad_accum_steps") return;
    for (const auto value : ValuesToTry(field)) {
      Strategy b = a;
      b.*field.member = value;
      if (b == a || !CheckLayout(b).ok() || !CheckCheckpointPercent(b).ok()) continue;
      ++pairs;
      EXPECT_EQ(StrategyDistance(a, b), 1)
          << field.name << ": " << StrategyToText(a) << " vs " << StrategyToText(b);
    }
  });
  EXPECT_GT(pairs, 50);
}

// The space is built before the pool's devices are known: on a pool of
// GPUs without fp8 tensor cores every fp8 candidate is pruned, saying why,
// before anything runs (and bf16 ones on GPUs without bf16); with them
// nothing is.
TEST(Searchers, WhatThePoolsDevicesCannotComputeIsPrunedBeforeAnythingRuns) {
  std::vector<Strategy> space;
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp8}) {
    Strategy s;
    s.micro_batch_size = 1;
    s.grad_accum_steps = 32;
    s.precision = p;
    space.push_back(s);
  }
  for (const bool fp8_cores : {false, true}) {
    DeviceSpec device = Device(int64_t{80} << 30);
    if (fp8_cores) device.peak.fp8 = 1800;
    SearchSetup setup;
    setup.candidates = space;
    setup.cost_model.emplace(SmallGpt(), 256, 32, device);
    absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
    ASSERT_TRUE(s.ok()) << s.status();
    const std::vector<PrunedStrategy> pruned = (*s)->TakePruned();
    if (fp8_cores) {
      EXPECT_THAT(pruned, IsEmpty());
      continue;
    }
    ASSERT_EQ(pruned.size(), 1u);
    EXPECT_EQ(pruned[0].strategy.precision, Precision::kFp8);
    EXPECT_THAT(pruned[0].reason,
                StartsWith("not supported by the device: strategy.precision: fp8 needs fp8 tensor "
                           "cores (CUDA compute capability 8.9 or newer"));
    std::optional<Proposal> p = (*s)->Next();
    ASSERT_TRUE(p.has_value());
    EXPECT_NE(p->strategy.precision, Precision::kFp8);
  }
  // A V100-like pool: fp16 tensor cores, no bf16 ones.
  DeviceSpec v100 = Device(int64_t{32} << 30);
  v100.peak.bf16 = 0;
  SearchSetup setup;
  setup.candidates = space;
  setup.cost_model.emplace(SmallGpt(), 256, 32, v100);
  absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<Precision> pruned;
  for (const PrunedStrategy& p : (*s)->TakePruned()) pruned.push_back(p.strategy.precision);
  EXPECT_THAT(pruned, ::testing::UnorderedElementsAre(Precision::kBf16, Precision::kFp8));
}

TEST(Searchers, HalvingMeasuresManyBrieflyAndTheBestThirdAgainWithTheJobsSteps) {
  const std::vector<Strategy> space = Space(1);
  const SimulatedDevice device(4096 * kMiB);
  SearchSetup setup;
  setup.algorithm = SearchAlgorithm::kHalving;
  setup.candidates = space;
  setup.cost_model = device.Model(0);
  setup.measured_steps = 9;
  setup.budget.max_trials = 26;  // 18 + 6 + 2
  absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
  ASSERT_TRUE(s.ok()) << s.status();
  std::map<int, int> by_steps;
  std::map<std::string, int> times;
  while (std::optional<Proposal> p = (*s)->Next()) {
    ++by_steps[p->measured_steps];
    ++times[StrategyToText(p->strategy)];
    ScoredTrial t = device.Run(p->strategy);
    t.metrics.measured_steps = p->measured_steps;
    (*s)->Report(t);
  }
  EXPECT_TRUE((*s)->Finished());
  EXPECT_EQ(by_steps[1], 18);
  EXPECT_EQ(by_steps[3], 6);
  EXPECT_EQ(by_steps[9], 2);
  int thrice = 0;
  for (const auto& [text, n] : times) thrice += n == 3;
  EXPECT_EQ(thrice, 2);
  // The answer is one of the strategies measured with the job's steps.
  ASSERT_TRUE((*s)->Best().has_value());
  EXPECT_EQ((*s)->Best()->metrics.measured_steps, 9);
  EXPECT_EQ(times[StrategyToText((*s)->Best()->strategy)], 3);
}

TEST(Searchers, GreedyStartsFromTheGivenStrategyAndMovesOneDimensionAtATime) {
  const std::vector<Strategy> space = Space(1);
  const SimulatedDevice device(4096 * kMiB);
  SearchSetup setup;
  setup.algorithm = SearchAlgorithm::kGreedy;
  setup.candidates = space;
  setup.cost_model = device.Model(0);
  setup.start = space.back();
  setup.budget.max_trials = 12;
  absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
  ASSERT_TRUE(s.ok()) << s.status();
  std::optional<Proposal> first = (*s)->Next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->strategy, space.back());
  (*s)->Report(device.Run(first->strategy));
  for (int i = 0; i < 5; ++i) {
    std::optional<Proposal> p = (*s)->Next();
    ASSERT_TRUE(p.has_value());
    const Strategy centre = (*s)->Best()->strategy;
    EXPECT_EQ(StrategyDistance(p->strategy, centre), 1) << StrategyToText(p->strategy);
    (*s)->Report(device.Run(p->strategy));
  }
}

TEST(Searchers, AutoSweepsWhatFitsTheBudgetAndSearchesWhatDoesNot) {
  const std::vector<Strategy> space = Space(1);
  const SimulatedDevice device(4096 * kMiB);
  const auto describe = [&](int max_trials) {
    SearchSetup setup;
    setup.candidates = space;
    setup.cost_model = device.Model(0);
    setup.budget.max_trials = max_trials;
    absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? (*s)->Describe() : "";
  };
  EXPECT_THAT(describe(0), StartsWith("auto: exhaustive"));
  EXPECT_THAT(describe(static_cast<int>(space.size())), StartsWith("auto: exhaustive"));
  EXPECT_THAT(describe(10), StartsWith("auto: bayes"));
  // A time limit that leaves room for a handful of trials.
  FakeClock clock;
  SearchSetup setup;
  setup.candidates = space;
  setup.cost_model = device.Model(0);
  setup.clock = &clock;
  setup.budget.deadline = clock.Now() + absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT((*s)->Describe(), StartsWith("auto: bayes"));
  EXPECT_THAT((*s)->Describe(), HasSubstr(absl::StrCat(space.size(), " candidates")));
}

TEST(Searchers, EveryAlgorithmStopsAtTheDeadline) {
  const std::vector<Strategy> space = Space(1);
  const SimulatedDevice device(4096 * kMiB);
  for (SearchAlgorithm a : {SearchAlgorithm::kExhaustive, SearchAlgorithm::kGreedy,
                            SearchAlgorithm::kBayes, SearchAlgorithm::kHalving}) {
    FakeClock clock;
    SearchSetup setup;
    setup.algorithm = a;
    setup.candidates = space;
    setup.cost_model = device.Model(0);
    setup.clock = &clock;
    setup.budget.deadline = clock.Now() + absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
    ASSERT_TRUE(s.ok()) << s.status();
    int trials = 0;
    while (std::optional<Proposal> p = (*s)->Next()) {
      (*s)->Report(device.Run(p->strategy));
      clock.Advance(absl::Seconds(10));
      ++trials;
    }
    EXPECT_EQ(trials, 3) << SearchAlgorithmName(a);
    EXPECT_TRUE((*s)->Finished());
  }
}

// A job resumed after a coordinator restart: a second searcher of the same
// setup takes up what the first proposed, pruned and measured (two trials
// still in flight), and the two together propose no strategy twice (at one
// step count), keep the trial budget, and still find the best.
TEST(Searchers, EveryAlgorithmResumesAnotherSearchersTrialsWithoutRepeatingThem) {
  const std::vector<Strategy> space = Space(1);
  const SimulatedDevice device(2048 * kMiB);
  const double best = device.BestOf(space);
  constexpr int kBudget = 26;
  for (SearchAlgorithm a : {SearchAlgorithm::kExhaustive, SearchAlgorithm::kGreedy,
                            SearchAlgorithm::kBayes, SearchAlgorithm::kHalving}) {
    const auto create = [&] {
      SearchSetup setup;
      setup.algorithm = a;
      setup.candidates = space;
      setup.cost_model = device.Model(0);
      setup.measured_steps = 9;
      setup.budget.max_trials = kBudget;
      setup.parallel_trials = 2;
      absl::StatusOr<std::unique_ptr<Searcher>> s = CreateSearcher(std::move(setup));
      EXPECT_TRUE(s.ok()) << s.status();
      return *std::move(s);
    };
    const auto run = [&device](const Proposal& p) {
      ScoredTrial t = device.Run(p.strategy);
      t.metrics.measured_steps = p.measured_steps > 0 ? p.measured_steps : 9;
      return t;
    };
    std::set<std::string> measured;  // "steps/strategy"
    std::set<std::string> pruned;
    int proposals = 0;
    const auto propose = [&](Searcher& s) -> std::optional<Proposal> {
      std::optional<Proposal> p = s.Next();
      if (!p) return p;
      ++proposals;
      const std::string key = absl::StrCat(p->measured_steps, "/", StrategyToText(p->strategy));
      EXPECT_TRUE(measured.insert(key).second) << SearchAlgorithmName(a) << " again: " << key;
      EXPECT_EQ(pruned.count(StrategyToText(p->strategy)), 0u) << SearchAlgorithmName(a);
      return p;
    };
    const auto take_pruned = [&](Searcher& s, std::vector<ResumedTrial>* record) {
      for (const PrunedStrategy& p : s.TakePruned()) {
        EXPECT_TRUE(pruned.insert(StrategyToText(p.strategy)).second)
            << SearchAlgorithmName(a) << " pruned again: " << StrategyToText(p.strategy);
        if (record != nullptr) {
          record->push_back(ResumedTrial{ScoredTrial{p.strategy, TrialStatus::kPruned, {}}, 0});
        }
      }
    };

    // The first searcher: 20 proposals (halving's first rung and two of its
    // second), two at a time; the last two are still running when it is lost.
    std::unique_ptr<Searcher> first = create();
    std::vector<ResumedTrial> recorded;
    std::vector<std::pair<size_t, Proposal>> in_flight;  // index in `recorded`
    take_pruned(*first, &recorded);
    for (int n = 0; n < 20;) {
      while (in_flight.size() < 2 && n < 20) {
        std::optional<Proposal> p = propose(*first);
        if (!p) break;
        ++n;
        recorded.push_back(
            ResumedTrial{ScoredTrial{p->strategy, TrialStatus::kRunning, {}}, p->measured_steps});
        in_flight.emplace_back(recorded.size() - 1, *p);
      }
      if (n >= 20 || in_flight.empty()) break;
      const ScoredTrial t = run(in_flight.front().second);
      recorded[in_flight.front().first].trial = t;
      first->Report(t);
      in_flight.erase(in_flight.begin());
      take_pruned(*first, &recorded);
    }
    ASSERT_EQ(proposals, 20) << SearchAlgorithmName(a);
    ASSERT_EQ(in_flight.size(), 2u) << SearchAlgorithmName(a);

    // The second takes up from the records; the two in flight end later.
    std::unique_ptr<Searcher> second = create();
    second->Resume(recorded);
    take_pruned(*second, nullptr);
    for (const auto& [index, p] : in_flight) {
      second->Report(run(p));
      take_pruned(*second, nullptr);
    }
    while (std::optional<Proposal> p = propose(*second)) {
      second->Report(run(*p));
      take_pruned(*second, nullptr);
    }
    EXPECT_TRUE(second->Finished()) << SearchAlgorithmName(a);
    EXPECT_LE(proposals, kBudget) << SearchAlgorithmName(a);
    if (a != SearchAlgorithm::kExhaustive) {  // exhaustive has no model to aim with
      ASSERT_TRUE(second->Best().has_value()) << SearchAlgorithmName(a);
      EXPECT_GE(device.Run(second->Best()->strategy).metrics.tokens_per_second, 0.9 * best)
          << SearchAlgorithmName(a);
    }
  }
}

TEST(Searchers, CreateRejectsBadSetups) {
  SearchSetup setup;
  EXPECT_THAT(std::string(CreateSearcher(setup).status().message()), StartsWith("space:"));
  setup.candidates = Space(1);
  setup.parallel_trials = 0;
  EXPECT_THAT(std::string(CreateSearcher(setup).status().message()),
              StartsWith("parallel_trials:"));
  setup.parallel_trials = 1;
  Strategy stranger;
  stranger.micro_batch_size = 3;
  stranger.grad_accum_steps = 1;
  setup.start = stranger;
  EXPECT_THAT(std::string(CreateSearcher(setup).status().message()), StartsWith("load_strategy:"));
  EXPECT_EQ(ParseSearchAlgorithm("bayes").value(), SearchAlgorithm::kBayes);
  EXPECT_THAT(std::string(ParseSearchAlgorithm("random").status().message()),
              HasSubstr("allowed: auto, exhaustive, greedy, bayes, halving"));
}

}  // namespace
}  // namespace autoaccel
