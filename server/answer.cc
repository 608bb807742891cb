#include "server/answer.h"

#include <algorithm>
#include <map>

#include "search/searcher.h"
#include "search/step_statistics.h"

namespace autoaccel {
namespace {

bool Eligible(const TrialRecord& t, int64_t memory_limit_bytes) {
  return IsEligible(ScoredTrial{Strategy(), t.status, t.metrics}, memory_limit_bytes);
}

// Every measurement of one strategy.
struct Measurements {
  const TrialRecord* first = nullptr;             // the search's measurement
  std::vector<const TrialRecord*> confirmations;  // eligible repeats
  std::vector<double> all;                        // throughput of every eligible one
};

}  // namespace

Answer ChooseAnswer(const std::vector<TrialRecord>& trials, int64_t memory_limit_bytes) {
  std::map<std::string, Measurements> by_strategy;
  for (const TrialRecord& t : trials) {
    if (!Eligible(t, memory_limit_bytes)) continue;
    Measurements& m = by_strategy[t.strategy_text];
    m.all.push_back(t.metrics.tokens_per_second);
    if (!t.confirms.empty()) {
      m.confirmations.push_back(&t);
    } else if (m.first == nullptr) {
      m.first = &t;
    }
  }
  Answer answer;
  double best = -1;
  const TrialRecord* pick = nullptr;
  const Measurements* picked = nullptr;
  // Confirmed strategies first: their figure is the median of the repeats.
  for (const auto& [text, m] : by_strategy) {
    if (m.confirmations.empty()) continue;
    std::vector<double> repeats;
    const TrialRecord* fastest = m.confirmations.front();
    for (const TrialRecord* c : m.confirmations) {
      repeats.push_back(c->metrics.tokens_per_second);
      if (c->metrics.tokens_per_second > fastest->metrics.tokens_per_second) fastest = c;
    }
    const double figure = Median(repeats);
    if (figure > best || (figure == best && pick != nullptr && fastest->index < pick->index)) {
      best = figure;
      pick = fastest;
      picked = &m;
    }
  }
  answer.confirmed = pick != nullptr;
  if (pick == nullptr) {
    for (const auto& [text, m] : by_strategy) {
      if (m.first == nullptr || m.first->metrics.IsNoisy()) continue;
      const double figure = m.first->metrics.tokens_per_second;
      if (figure > best || (figure == best && pick != nullptr && m.first->index < pick->index)) {
        best = figure;
        pick = m.first;
        picked = &m;
      }
    }
  }
  if (pick == nullptr) return answer;
  answer.trial_id = pick->trial_id;
  answer.measurements = static_cast<int>(picked->all.size());
  const auto [lo, hi] = std::minmax_element(picked->all.begin(), picked->all.end());
  answer.spread = *lo > 0 ? (*hi - *lo) / *lo : 0;
  answer.first_tokens_per_second =
      picked->first != nullptr ? picked->first->metrics.tokens_per_second : 0;
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
        !Eligible(t, memory_limit_bytes)) {
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
