#include "server/answer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "search/searcher.h"

namespace autoaccel {
namespace {}  // namespace

Answer ChooseAnswer(const std::vector<TrialRecord>& trials, int64_t memory_limit_bytes,
                    double tolerance) {
  Answer answer;
  answer.standings = Settle(trials, memory_limit_bytes, tolerance);
  const Standings& standings = answer.standings;
  const Standing* s = standings.Answer();
  if (s == nullptr) return answer;
  answer.certainty = standings.certainty;
  answer.confirmed = s->agrees;
  answer.figure = s->figure;
  answer.interval = s->interval;
  answer.spread = s->spread;
  answer.measurements = s->measurements();
  answer.first_tokens_per_second = s->first != nullptr ? s->first->metrics.tokens_per_second : 0;
  const TrialRecord* pick = nullptr;
  std::vector<const TrialRecord*> all;
  if (s->first != nullptr) all.push_back(s->first);
  all.insert(all.end(), s->repeats.begin(), s->repeats.end());
  for (const TrialRecord* t : all) {
    const double v = t->metrics.tokens_per_second;
    if (std::find(s->kept.begin(), s->kept.end(), v) == s->kept.end()) continue;
    if (std::find(answer.measured_on.begin(), answer.measured_on.end(), t->worker_id) ==
        answer.measured_on.end()) {
      answer.measured_on.push_back(t->worker_id);
    }
    if (pick == nullptr ||
        std::fabs(v - s->figure) <= std::fabs(pick->metrics.tokens_per_second - s->figure)) {
      pick = t;
    }
  }
  answer.trial_id = pick != nullptr ? pick->trial_id : "";
  if (standings.certainty == Certainty::kTie) {
    for (const Standing& other : standings.ranked) {
      if (&other == s) continue;
      if (std::find(standings.tie.begin(), standings.tie.end(), other.strategy_text) !=
          standings.tie.end()) {
        answer.tied_with.emplace_back(other.strategy_text, other.figure);
      }
    }
  }
  return answer;
}

std::vector<const TrialRecord*> TrialsToConfirm(const std::vector<TrialRecord>& trials, int count,
                                                int64_t memory_limit_bytes) {
  std::map<std::string, const TrialRecord*> fastest;  // by strategy, unconfirmed only
  std::map<std::string, bool> has_confirmation;
  for (const TrialRecord& t : trials) {
    if (!t.confirms.empty()) has_confirmation[t.strategy_text] = true;
  }
  for (const TrialRecord& t : trials) {
    if (!t.confirms.empty() || has_confirmation.count(t.strategy_text) ||
        !CanAnswer(t, memory_limit_bytes)) {
      continue;
    }
    const TrialRecord*& f = fastest[t.strategy_text];
    if (f == nullptr || t.metrics.tokens_per_second > f->metrics.tokens_per_second) f = &t;
  }
  std::vector<const TrialRecord*> out;
  for (const auto& [text, t] : fastest) out.push_back(t);
  std::stable_sort(out.begin(), out.end(), [](const TrialRecord* a, const TrialRecord* b) {
    if (a->metrics.tokens_per_second != b->metrics.tokens_per_second) {
      return a->metrics.tokens_per_second > b->metrics.tokens_per_second;
    }
    return a->index < b->index;
  });
  if (static_cast<int>(out.size()) > count) out.resize(std::max(0, count));
  return out;
}

}  // namespace autoaccel
