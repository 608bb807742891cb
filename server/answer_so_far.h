// A running job's answer so far, kept without settling all its measurements
// again at every result.
//
// The answer (server/answer.h ChooseAnswer, server/settle.h) rests on every
// measured trial, and settling them costs O(trials): recomputed at each of a
// long job's results it was three quarters of the coordinator's time at
// 1,000 workers (bench/scale.py). Most results cannot change it: by
// settle.h's rules, a strategy's first measurement (no other measured trial
// of it, not a confirmation) below the answer's figure is measured once, so
// it neither leads (the leader has the highest figure, among the strategies
// measured more than once when there are any, and the answer's figure is at
// most the leader's) nor answers a tie (only strategies whose measurements
// agree do, which takes two). Such a result is noted here instead.
//
// Not thread-safe: the job's owner (the manager's lock) calls it.
#ifndef AUTOACCEL_SERVER_ANSWER_SO_FAR_H_
#define AUTOACCEL_SERVER_ANSWER_SO_FAR_H_

#include <set>
#include <string>
#include <vector>

#include "server/answer.h"
#include "server/store/records.h"

namespace autoaccel {

class AnswerSoFarShortcut {
 public:
  // True when `ended`, which just ended SUCCEEDED, cannot change the
  // answer as last recomputed (see above); it is then noted as measured.
  // False when the answer must be recomputed (or nothing is known yet).
  bool NoteIfUnchanged(const TrialRecord& ended);
  // The answer was recomputed from `measured`, the job's SUCCEEDED trials.
  void Recomputed(const Answer& answer, const std::vector<TrialRecord>& measured);
  // A trial's measurement was withdrawn or changed: the next result
  // recomputes.
  void Forget() { known_ = false; }

 private:
  bool known_ = false;
  bool answers_ = false;            // some strategy answers
  double figure_ = 0;               // the answer's figure (tokens/s)
  std::set<std::string> measured_;  // strategy texts with a SUCCEEDED trial
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_ANSWER_SO_FAR_H_
