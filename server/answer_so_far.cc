#include "server/answer_so_far.h"

namespace autoaccel {

bool AnswerSoFarShortcut::NoteIfUnchanged(const TrialRecord& ended) {
  if (!known_ || !answers_ || !ended.confirms.empty() ||
      !(ended.metrics.tokens_per_second < figure_) || measured_.count(ended.strategy_text) > 0) {
    return false;
  }
  measured_.insert(ended.strategy_text);
  return true;
}

void AnswerSoFarShortcut::Recomputed(const Answer& answer,
                                     const std::vector<TrialRecord>& measured) {
  known_ = true;
  answers_ = !answer.trial_id.empty();
  figure_ = answer.figure;
  measured_.clear();
  for (const TrialRecord& t : measured) measured_.insert(t.strategy_text);
}

}  // namespace autoaccel
