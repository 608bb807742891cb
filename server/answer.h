// Which measurement answers a job, and which strategies are measured again
// before it does.
//
// One dry run of a few seconds on a shared machine can be an outlier (a
// 2.6 ms step on a busy CPU measured at 6x the median). So before a job ends,
// its best few strategies run again ("confirmation" trials, interleaved),
// and the answer is chosen by the repeats: a strategy's confirmed figure is
// the median throughput of its confirmation trials, and the spread of all
// its measurements is shown. A strategy whose only measurement is noisy
// (TrialMetrics::IsNoisy) is never the answer; a strategy measured once and
// not noisy may be, when no confirmation could run, and says so.
//
// Pure functions over trial records: no store, no clock; any thread.
#ifndef AUTOACCEL_SERVER_ANSWER_H_
#define AUTOACCEL_SERVER_ANSWER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/store.h"

namespace autoaccel {

struct Answer {
  std::string trial_id;    // "" when no trial can answer
  bool confirmed = false;  // measured again by a confirmation trial
  // Every SUCCEEDED measurement of the answer's strategy, first and repeats:
  // (max - min) / min of their throughput; 0 with one measurement.
  double spread = 0;
  int measurements = 0;
  double first_tokens_per_second = 0;  // the first measurement's
};

// The answer among `trials` (a job's, in proposal order): the strategy with
// the highest confirmed throughput, answered by its best confirmation trial;
// when no strategy is confirmed, the fastest SUCCEEDED trial that is not
// noisy. Only trials eligible as answers count (IsEligible: finite
// throughput, MFU at most 100%, peak memory within `memory_limit_bytes` when
// > 0). Ties go to the earlier trial.
Answer ChooseAnswer(const std::vector<TrialRecord>& trials, int64_t memory_limit_bytes);

// The trials to confirm: the `count` fastest eligible SUCCEEDED trials of
// distinct strategies that are not themselves confirmations and have no
// confirmation yet (running, done or cancelled), fastest first.
std::vector<const TrialRecord*> TrialsToConfirm(const std::vector<TrialRecord>& trials, int count,
                                                int64_t memory_limit_bytes);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_ANSWER_H_
