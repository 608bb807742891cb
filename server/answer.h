// Which measurement answers a job, and which strategies are measured again
// before it does.
//
// One dry run of a few seconds on a shared machine can be an outlier (a
// 2.6 ms step on a busy CPU measured at 6x the median). So before a job ends,
// its best few strategies run again ("confirmation" trials, interleaved),
// and the answer is chosen by server/settle.h's rules over all the
// measurements: a figure with its interval, settled when the leader's
// measurements agree (within the job's tolerance) and its interval overlaps
// no rival's, a tie answered by the simplest strategy when they overlap, and
// provisional when its measurements disagree or it was measured once.
//
// Pure functions over trial records: no store, no clock; any thread.
#ifndef AUTOACCEL_SERVER_ANSWER_H_
#define AUTOACCEL_SERVER_ANSWER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/settle.h"
#include "server/store/records.h"

namespace autoaccel {

struct Answer {
  // The trial that answers: of the answer's kept measurements, the one
  // closest to its figure (the later on a tie). "" when no trial can answer.
  std::string trial_id;
  Certainty certainty = Certainty::kNone;
  // Measured two or more times, and the measurements agree (settle.h): a
  // settled answer, or a tie's answer that was repeated.
  bool confirmed = false;
  double figure = 0;  // tokens/s: the mean of the kept measurements
  ThroughputInterval interval;
  // (max - min) / min of the kept measurements; 0 with one.
  double spread = 0;
  int measurements = 0;
  // The workers (a gang's: comma-joined) of its kept measurements, each
  // once, in measurement order: two or more means its figure does not rest
  // on one worker's word.
  std::vector<std::string> measured_on;
  double first_tokens_per_second = 0;  // the first measurement's
  // A tie: the other strategies of the tie, with their figures, by figure.
  std::vector<std::pair<std::string, double>> tied_with;
  // What it was chosen from: every strategy that can answer (their
  // first/repeats point into the `trials` given to ChooseAnswer).
  Standings standings;
};

// The answer among `trials` (a job's, in proposal order) by Settle's rules
// with `tolerance` (> 0). Only trials eligible as answers count (IsEligible:
// finite throughput, MFU at most 100%, peak memory within
// `memory_limit_bytes` when > 0).
Answer ChooseAnswer(const std::vector<TrialRecord>& trials, int64_t memory_limit_bytes,
                    double tolerance);

// The trials to confirm: the `count` fastest eligible SUCCEEDED trials of
// distinct strategies that are not themselves confirmations and have no
// confirmation yet (running, done or cancelled), fastest first.
std::vector<const TrialRecord*> TrialsToConfirm(const std::vector<TrialRecord>& trials, int count,
                                                int64_t memory_limit_bytes);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_ANSWER_H_
