// Searchers decide which strategy to try next, which ones never to run, and
// remember what the trials measured.
//
// The coordinator drives a searcher: it calls Next() for a proposal whenever
// a gang of devices is free (so several trials may be in flight at once),
// runs the trial, and calls Report() with the result, until Finished(). After
// creating a searcher and after every Report() it calls TakePruned() and
// records those strategies as PRUNED trials with their reasons. A searcher
// never runs anything itself and does no I/O.
//
// Every algorithm works over the same candidates (the compatible strategies of
// the job's space, after --include/--exclude) with the same cost model
// (search/cost_model.h), calibrated from every measured trial, and the same
// pruning rules:
//   - device: candidates the device rules refuse (spec/compatibility.h's
//     CheckDeviceRules: bf16 or fp8 where the cost model's device, the
//     pool's, cannot compute it; SetDeviceFacts), before anything runs;
//   - memory: a candidate whose calibrated estimate exceeds the device memory
//     by more than the margin is pruned, before it is ever proposed (checked
//     again after each calibration; a pruned candidate never comes back);
//   - out of memory: after a trial runs out of memory, every open candidate
//     that needs at least as much memory along a monotone dimension (same
//     strategy otherwise, with a micro-batch at least as large, sharding at
//     most as deep, recompute at most as much, no more offload) is pruned;
//   - failures: once a value, or a pair of values, is known to fail
//     (search/failure_memory.h: two trials with it FAILED for one reason and
//     none succeeded), every open candidate with it is pruned.
//
// Thread-compatible: the caller serialises all calls on one searcher (e.g.
// under the job's mutex).
#ifndef AUTOACCEL_SEARCH_SEARCHER_H_
#define AUTOACCEL_SEARCH_SEARCHER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "search/cost_model.h"
#include "spec/strategy.h"
#include "spec/trial.h"

namespace autoaccel {

struct SearchBudget {
  // No strategy is proposed once clock->Now() >= deadline.
  absl::Time deadline = absl::InfiniteFuture();
  // At most this many proposals in all; 0 = unlimited.
  int max_trials = 0;
};

// In proxy mode (SearchSetup.cost_model in proxy mode, search/proxy.h) a
// reported trial's metrics are what its proxy trial measured; the searcher
// calibrates on them and ranks by the full run's figures extrapolated from
// them (search/proxy_extrapolation.h), which Best() returns.
struct ScoredTrial {
  Strategy strategy;
  TrialStatus status = TrialStatus::kPending;
  TrialMetrics metrics;
  std::string reason;  // why a FAILED trial failed (search/failure_memory.h)
};

// One trial to run: the strategy and how many steps to measure (0 = the job's
// default; successive halving measures its early rungs with fewer).
struct Proposal {
  Strategy strategy;
  int measured_steps = 0;
  // The cost model's prediction for the strategy at the moment it was
  // proposed (calibrated on every trial reported before); nullopt for a
  // searcher without a cost model.
  std::optional<TrialPrediction> predicted;
};

// Kinds of pruning: a PrunedStrategy's reason is "KIND: details", so that
// thousands of pruned candidates can be summarised by kind.
inline constexpr char kPrunedNotFitting[] = "predicted not to fit";
inline constexpr char kPrunedByOom[] = "dominated by an out-of-memory trial";
inline constexpr char kPrunedUnsupported[] = "not supported by the device";

// A candidate the searcher decided never to run, and why (shown to the user):
// "KIND: details", KIND one of the kinds above.
struct PrunedStrategy {
  Strategy strategy;
  std::string reason;
};

// True when `trial` can be the answer of a job: it SUCCEEDED, its throughput
// is a finite non-negative number, its MFU is at most 100% (when the peak is
// known: above it, the peak or the measurement is wrong), and (when
// memory_limit_bytes > 0) its peak_memory_bytes <= memory_limit_bytes.
bool IsEligible(const ScoredTrial& trial, int64_t memory_limit_bytes);

// The eligible trial with the highest tokens_per_second; ties go to the lower
// peak_memory_bytes, then to the earlier trial in `trials`. nullopt when no
// trial is eligible. The ranking every searcher's Best() uses.
std::optional<ScoredTrial> SelectBest(const std::vector<ScoredTrial>& trials,
                                      int64_t memory_limit_bytes);

// True when `b` needs at least as much device memory as `a` by construction:
// the two are equal but for the micro-batch (b's >= a's, gradient
// accumulation following), sharding (b's at most as deep: none < zero1 <
// zero2 < fsdp), recompute (b's at most as much: none, then selective and
// full by the share of layers they cover) and offload (b's none or a's cpu).
// Reflexive.
bool NeedsAtLeastAsMuchMemory(const Strategy& b, const Strategy& a);

// How many strategy dimensions `a` and `b` differ in. Dimensions: layout
// (dp, tp, pp), sharding, sequence parallelism, pipeline schedule (with its
// virtual stages), micro-batch size (gradient accumulation follows it),
// precision, checkpointing (with its percent), attention, optimizer, offload.
int StrategyDistance(const Strategy& a, const Strategy& b);

// A trial an earlier searcher of the same job proposed or pruned, given to
// Searcher::Resume when the job goes on after a coordinator restart.
// trial.status: PRUNED for a candidate it pruned; terminal once the trial
// ended (metrics then as reported); PENDING or RUNNING for one still to
// finish (it runs again, or on, and is reported later).
struct ResumedTrial {
  ScoredTrial trial;
  int measured_steps = 0;  // the proposal's (0: the job's)
};

class Searcher {
 public:
  virtual ~Searcher() = default;

  // The next trial to run, or nullopt when none can be proposed now: the
  // space is exhausted, max_trials proposals were made, the deadline passed,
  // or the algorithm waits for results of trials in flight (then Finished()
  // is false). Each returned proposal counts toward max_trials.
  virtual std::optional<Proposal> Next() = 0;

  // Candidates pruned since the last call, in the order decided.
  virtual std::vector<PrunedStrategy> TakePruned() = 0;

  // Records a finished trial of a strategy previously proposed.
  // REQUIRES: IsTerminal(trial.status); report each proposal at most once.
  virtual void Report(const ScoredTrial& trial) = 0;

  // Takes up the search of an earlier searcher of the same job (same
  // setup; a job resumed after a coordinator restart) from its trials, in
  // proposal order: each counts as proposed (toward max_trials; a strategy
  // is not proposed again unless the algorithm measures it again by design,
  // as halving's next rung), those that ended are reported as by Report(),
  // the others count as in flight and are Report()ed when they end; a
  // PRUNED one is never proposed, and TakePruned() does not return it again.
  // REQUIRES: called once, before the first Next().
  virtual void Resume(const std::vector<ResumedTrial>& trials) = 0;

  // True when no later Next() will return a proposal. Says nothing about
  // trials still running.
  virtual bool Finished() const = 0;

  // The answer so far by SelectBest(); nullopt if none.
  virtual std::optional<ScoredTrial> Best() const = 0;

  // The algorithm, e.g. "bayes", or "auto: bayes (2311 candidates, room for
  // about 90 trials)" for the automatic choice.
  virtual std::string Describe() const = 0;

  // The calibrated cost model (owned by the searcher; valid until its next
  // non-const call), or null for a searcher without one.
  virtual const CostModel* cost_model() const = 0;
};

enum class SearchAlgorithm {
  // Picks one of the others from the space size, the trial budget and the
  // time limit: exhaustive when every candidate fits the budget, otherwise
  // bayes.
  kAuto,
  // Every candidate once, in the space's order (likely-best first).
  kExhaustive,
  // Coordinate descent from the cost model's best guess: the unmeasured
  // neighbours (one dimension changed) of the best strategy measured so far,
  // best predicted first; at a local optimum, restarts from the best
  // predicted candidate not yet measured.
  kGreedy,
  // A Gaussian-process surrogate of log throughput over the strategy
  // encoding, whose prior mean is the calibrated cost model; proposes the
  // candidate of highest expected improvement (trials in flight count as
  // measured at their predicted value, so parallel proposals spread out).
  kBayes,
  // Successive halving: the best predicted candidates measured with few
  // steps, the best third of them again with more, until the job's steps.
  kHalving,
};
// "auto", "exhaustive", "greedy", "bayes", "halving".
absl::string_view SearchAlgorithmName(SearchAlgorithm a);
// INVALID_ARGUMENT "algorithm: unknown value 'x' (allowed: auto, ...)".
absl::StatusOr<SearchAlgorithm> ParseSearchAlgorithm(absl::string_view name);

struct SearchSetup {
  SearchAlgorithm algorithm = SearchAlgorithm::kAuto;
  // The candidates, in the space's order (EnumerateSpace(): likely-best
  // first), already filtered by the user's constraints. Duplicates are
  // proposed once.
  std::vector<Strategy> candidates;
  // Predicts and learns; the searcher owns it.
  std::optional<CostModel> cost_model;
  SearchBudget budget;
  // Trials that can run at once (free device gangs); auto uses it to judge
  // how many trials fit in the time limit.
  int parallel_trials = 1;
  // The job's warm-up and measured steps per trial.
  int warmup_steps = 2;
  int measured_steps = 5;
  // A trial's timed steps cover at least this long (TrialSpec).
  double min_measured_seconds = 0;
  // Candidates predicted to exceed the device memory by more than this
  // fraction are pruned.
  double memory_margin = 0.1;
  // Trials whose peak memory exceeds it are not eligible as the answer; 0 =
  // no limit.
  int64_t memory_limit_bytes = 0;
  // Semi-automatic mode (--load-strategy --finetune): greedy starts from this
  // strategy (which must be one of the candidates) instead of the cost
  // model's best guess.
  std::optional<Strategy> start;
  // nullptr = RealClock(); not owned, must outlive the searcher.
  const Clock* clock = nullptr;
};

// INVALID_ARGUMENT for no candidates ("space: ..."), a candidate with a
// non-positive size ("space[i]: ..."), max_trials < 0 ("max_trials: ..."),
// memory_limit_bytes < 0, parallel_trials < 1, measured_steps < 1, a start
// that is not a candidate ("load_strategy: ...").
absl::StatusOr<std::unique_ptr<Searcher>> CreateSearcher(SearchSetup setup);

// Exhaustive search without a cost model (nothing pruned): every candidate of
// `space` once, in the order given.
absl::StatusOr<std::unique_ptr<Searcher>> CreateExhaustiveSearcher(std::vector<Strategy> space,
                                                                   SearchBudget budget,
                                                                   const Clock* clock,
                                                                   int64_t memory_limit_bytes = 0);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_SEARCHER_H_
