// Searchers decide which strategy to try next and remember what the trials
// measured.
//
// The coordinator drives a searcher: it calls Next() for a strategy, runs the
// trial, and calls Report() with the result, until Finished(). A searcher never
// runs anything itself and does no I/O.
//
// Thread-compatible: the caller serialises all calls on one searcher (e.g.
// under the job's mutex).
#ifndef AUTOACCEL_SEARCH_SEARCHER_H_
#define AUTOACCEL_SEARCH_SEARCHER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "search/clock.h"
#include "search/strategy.h"
#include "search/trial.h"

namespace autoaccel {

struct SearchBudget {
  // No strategy is proposed once clock->Now() >= deadline.
  absl::Time deadline = absl::InfiniteFuture();
  // At most this many proposals in all; 0 = unlimited.
  int max_trials = 0;
};

struct ScoredTrial {
  Strategy strategy;
  TrialStatus status = TrialStatus::kPending;
  TrialMetrics metrics;
};

// True when `trial` can be the answer of a job: it SUCCEEDED, its throughput
// is a finite non-negative number, and (when memory_limit_bytes > 0) its
// peak_memory_bytes <= memory_limit_bytes.
bool IsEligible(const ScoredTrial& trial, int64_t memory_limit_bytes);

// The eligible trial with the highest tokens_per_second; ties go to the lower
// peak_memory_bytes, then to the earlier trial in `trials`. nullopt when no
// trial is eligible. The ranking every searcher's Best() uses.
std::optional<ScoredTrial> SelectBest(const std::vector<ScoredTrial>& trials,
                                      int64_t memory_limit_bytes);

class Searcher {
 public:
  virtual ~Searcher() = default;

  // The next strategy to run, or nullopt when none can be proposed now (space
  // exhausted, max_trials proposals made, or deadline reached). Each call that
  // returns a strategy counts as one proposal.
  virtual std::optional<Strategy> Next() = 0;

  // Records a finished trial of a strategy previously returned by Next().
  // REQUIRES: IsTerminal(trial.status); report each proposal at most once.
  virtual void Report(const ScoredTrial& trial) = 0;

  // True when no later Next() will return a strategy (space exhausted,
  // max_trials proposals made, or deadline reached). Says nothing about
  // trials still running.
  virtual bool Finished() const = 0;

  // The best reported trial so far by SelectBest(); nullopt if none.
  virtual std::optional<ScoredTrial> Best() const = 0;
};

// A searcher that proposes every strategy of `space` once, in the order given
// (EnumerateSpace() puts the likely-best first), and learns nothing from the
// results except which is best. Duplicates in `space` are proposed once.
//
// `clock` is not owned and must outlive the searcher; nullptr means
// RealClock(). memory_limit_bytes > 0 makes trials whose peak memory exceeds
// it ineligible for Best(); 0 means no limit.
//
// INVALID_ARGUMENT for an empty space ("space: ..."), a strategy with a
// non-positive size ("space[i]: ..."), max_trials < 0 ("max_trials: ...") or
// memory_limit_bytes < 0 ("memory_limit_bytes: ...").
absl::StatusOr<std::unique_ptr<Searcher>> CreateExhaustiveSearcher(std::vector<Strategy> space,
                                                                   SearchBudget budget,
                                                                   const Clock* clock,
                                                                   int64_t memory_limit_bytes = 0);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_SEARCHER_H_
