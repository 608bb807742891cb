// What a job's failed trials teach its search: a strategy value (one
// "key=value" of the canonical text: "sharding=zero1", "precision=fp16",
// "tp=2") is taken to be what fails when
//   - kFailuresToPrune trials with it FAILED for the same reason,
//   - no trial with it succeeded, while one with another value of its
//     dimension did (so the job can succeed, and the dimension matters), and
//   - it is the only value common to those failures that never succeeded
//     (were "attention=sdpa" in all of them too, and never measured, either
//     could be the cause: nothing is pruned until a success tells them apart);
// every candidate with that value is then pruned, as an out-of-memory trial
// prunes what needs more memory. A launcher script that exits on a value it does
// not support (docs/LAUNCHERS.md) thus costs two trials per value, not one
// per candidate.
//
// A pair of values of two dimensions ("sharding=zero2" with
// "precision=fp16") is taken to fail together by the same rule, when each
// of the two succeeded in some trial but never in one trial together:
//   - kFailuresToPrune trials with both FAILED for the same reason,
//   - none of the values those failures share is unproven on its own (a
//     value that never succeeded is the single-value rule's suspect), and
//   - it is the only pair those failures share that never succeeded
//     together (another such pair could as well be the cause).
// Every candidate with both values is then pruned.
//
// Only FAILED trials count: OOM has its own rule, and a trial lost to
// infrastructure is reported as CANCELLED. Reasons are compared by their
// key (common/trial_reason.h ReasonKey: what happened and the last line of
// stderr, without the rank and worker, digits as "#"), so that the same
// script error on two workers is one reason.
//
// Thread-compatible; owned by one searcher.
#ifndef AUTOACCEL_SEARCH_FAILURE_MEMORY_H_
#define AUTOACCEL_SEARCH_FAILURE_MEMORY_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/trial_reason.h"
#include "spec/strategy.h"

namespace autoaccel {

inline constexpr int kFailuresToPrune = 2;

// The kinds of pruning (search/searcher.h's "KIND: details").
inline constexpr char kPrunedByFailures[] = "a value that keeps failing";
inline constexpr char kPrunedByFailingPair[] = "a combination that keeps failing";

// A value (or pair of values) that is now known to fail, and the prune
// reason for the candidates that have it ("a value that keeps failing:
// sharding=zero1 failed in 2 trials (script exited with code 2: ...)").
struct FailingValue {
  std::vector<std::string> values;  // {"sharding=zero1"}, or a pair
  std::string prune_reason;
  // Whether a strategy of `strategy_values` (FailureMemory::Values) has
  // every one of them.
  bool In(const std::vector<std::string>& strategy_values) const;
};

class FailureMemory {
 public:
  // A trial of `s` succeeded: none of its values is ever taken to fail.
  // Returns the values this success makes known to fail (it may tell two
  // suspects apart, or show that their dimension matters).
  std::vector<FailingValue> Succeeded(const Strategy& s);
  // A trial of `s` FAILED with `reason`. Returns the values this failure
  // makes known to fail (each returned once per job).
  std::vector<FailingValue> Failed(const Strategy& s, const std::string& reason);

  // The "key=value" parts of a strategy's canonical text.
  static std::vector<std::string> Values(const Strategy& s);

 private:
  // Values that newly qualify (see above), from the failures recorded.
  std::vector<FailingValue> Qualifying();

  // Pairs that newly qualify (see above).
  std::vector<FailingValue> QualifyingPairs();

  std::set<std::string> succeeded_;  // values
  // Values that succeeded in one trial, as "a|b" with a < b.
  std::set<std::string> succeeded_pairs_;
  // By reason key, the values of each trial that failed with it.
  std::map<std::string, std::vector<std::vector<std::string>>> failures_;
  std::set<std::string> failing_;                 // returned already (pairs as "a|b")
  std::map<std::string, std::string> summaries_;  // reason key -> its latest ReasonSummary
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_FAILURE_MEMORY_H_
