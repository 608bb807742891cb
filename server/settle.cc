#include "server/settle.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "search/searcher.h"
#include "spec/step_statistics.h"

namespace autoaccel {
namespace {

// Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom
// 1..kMaxMeasurements-1; a job measures a strategy at most kMaxMeasurements
// times, more only when a resumed job's records hold more (then the normal
// quantile, 1.96, is within 15% of t for any df beyond the table).
double T975(int degrees_of_freedom) {
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262};
  if (degrees_of_freedom < 1) return 0;
  const int i = degrees_of_freedom - 1;
  return i < static_cast<int>(std::size(kT)) ? kT[i] : 1.96;
}

bool Overlap(const ThroughputInterval& a, const ThroughputInterval& b) {
  return a.low <= b.high && b.low <= a.high;
}

// How many of sharding, recomputation and offload the strategy switches on.
int Complexity(const std::string& text) {
  absl::StatusOr<Strategy> s = ParseStrategyText(text);
  if (!s.ok()) return 3;
  return (s->sharding != Sharding::kNone) + (s->checkpointing != Checkpointing::kNone) +
         (s->offload != Offload::kNone);
}

}  // namespace

bool CanAnswer(const TrialRecord& t, int64_t memory_limit_bytes) {
  return !t.full_size &&
         IsEligible(ScoredTrial{Strategy(), t.status, t.metrics}, memory_limit_bytes);
}

const char* CertaintyName(Certainty c) {
  switch (c) {
    case Certainty::kNone:
      return "";
    case Certainty::kSettled:
      return "settled";
    case Certainty::kTie:
      return "tie";
    case Certainty::kProvisional:
      return "provisional";
  }
  return "";
}

std::string MeasuredText(int measurements, double spread, double low, double high) {
  if (measurements < 2) return "measured once";
  return absl::StrFormat("measured %d times, spread %.0f%%, 95%% interval %.0f-%.0f tokens/s",
                         measurements, 100 * spread, low, high);
}

ThroughputInterval IntervalOf(const std::vector<double>& values, double tolerance) {
  // `values` are the kept measurements.
  ThroughputInterval out;
  if (values.empty()) return out;
  double sum = 0;
  for (double v : values) sum += v;
  const int n = static_cast<int>(values.size());
  out.mean = sum / n;
  if (n == 1) {
    out.low = out.mean * (1 - tolerance);
    out.high = out.mean * (1 + tolerance);
    return out;
  }
  double squares = 0;
  for (double v : values) squares += (v - out.mean) * (v - out.mean);
  const double half = T975(n - 1) * std::sqrt(squares / (n - 1)) / std::sqrt(double(n));
  // A throughput is never negative: two wide-apart measurements give an
  // interval from 0.
  out.low = std::max(0.0, out.mean - half);
  out.high = out.mean + half;
  return out;
}

std::vector<double> KeptMeasurements(const std::vector<double>& values) {
  if (values.size() < 3) return values;
  const double median = Median(values);
  size_t farthest = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (std::fabs(values[i] - median) > std::fabs(values[farthest] - median)) farthest = i;
  }
  std::vector<double> kept = values;
  kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(farthest));
  return kept;
}

bool SimplerStrategy(const Standing& a, const Standing& b) {
  const int ca = Complexity(a.strategy_text), cb = Complexity(b.strategy_text);
  if (ca != cb) return ca < cb;
  if (a.peak_memory_bytes != b.peak_memory_bytes) {
    return a.peak_memory_bytes < b.peak_memory_bytes;
  }
  return a.strategy_text < b.strategy_text;
}

Standings Settle(const std::vector<TrialRecord>& trials, int64_t memory_limit_bytes,
                 double tolerance) {
  std::map<std::string, Standing> by_strategy;
  std::map<std::string, int> first_index;  // for the order of equal figures
  for (const TrialRecord& t : trials) {
    if (!CanAnswer(t, memory_limit_bytes)) continue;
    Standing& s = by_strategy[t.strategy_text];
    if (s.strategy_text.empty()) {
      s.strategy_text = t.strategy_text;
      first_index[t.strategy_text] = t.index;
    }
    s.throughputs.push_back(t.metrics.tokens_per_second);
    s.peak_memory_bytes = std::max(s.peak_memory_bytes, t.metrics.peak_memory_bytes);
    if (!t.confirms.empty()) {
      s.repeats.push_back(&t);
    } else if (s.first == nullptr) {
      s.first = &t;
    }
  }
  Standings out;
  for (auto& [text, s] : by_strategy) {
    // Measured once and noisy: that one figure says nothing.
    if (s.repeats.empty() && (s.first == nullptr || s.first->metrics.IsNoisy())) continue;
    s.kept = KeptMeasurements(s.throughputs);
    s.interval = IntervalOf(s.kept, tolerance);
    s.figure = s.interval.mean;
    const auto [lo, hi] = std::minmax_element(s.kept.begin(), s.kept.end());
    s.spread = *lo > 0 ? (*hi - *lo) / *lo : 0;
    const double half_width = (s.interval.high - s.interval.low) / 2;
    s.agrees = s.measurements() >= 2 &&
               (s.spread <= tolerance ||
                (s.kept.size() >= 3 && s.figure > 0 && half_width <= tolerance * s.figure));
    out.ranked.push_back(std::move(s));
  }
  if (out.ranked.empty()) return out;
  // Strategies measured more than once rank before those measured once: a
  // repeated figure is what the answer rests on (the search's fastest first
  // measurement is the luckiest of many).
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [&first_index](const Standing& a, const Standing& b) {
                     const bool ra = a.measurements() > 1, rb = b.measurements() > 1;
                     if (ra != rb) return ra;
                     if (a.figure != b.figure) return a.figure > b.figure;
                     return first_index.at(a.strategy_text) < first_index.at(b.strategy_text);
                   });
  const Standing& leader = out.ranked.front();
  out.answer = 0;
  std::vector<int> rivals;  // overlapping the leader, by figure
  for (int i = 1; i < static_cast<int>(out.ranked.size()); ++i) {
    if (Overlap(out.ranked[i].interval, leader.interval)) rivals.push_back(i);
  }
  const auto can_measure = [](const Standing& s) { return s.measurements() < kMaxMeasurements; };
  if (!leader.agrees) {
    out.certainty = Certainty::kProvisional;
    if (can_measure(leader)) out.measure_again.push_back(leader.strategy_text);
    return out;
  }
  if (rivals.empty()) {
    out.certainty = Certainty::kSettled;
    return out;
  }
  out.certainty = Certainty::kTie;
  out.tie.push_back(leader.strategy_text);
  int simplest = 0;  // of the whole tie, whether its measurements agree or not
  for (int i : rivals) {
    const Standing& rival = out.ranked[i];
    out.tie.push_back(rival.strategy_text);
    if (SimplerStrategy(rival, out.ranked[simplest])) simplest = i;
    // Only a strategy whose own measurements agree may answer: a rival that
    // overlaps because its measurements disagree is not known to be as fast.
    if (rival.agrees && SimplerStrategy(rival, out.ranked[out.answer])) out.answer = i;
  }
  // The leader, its closest rival and the tie's simplest, measured again, may
  // part (or let the simplest answer).
  for (int i : {0, rivals.front(), simplest}) {
    const Standing& s = out.ranked[i];
    if (can_measure(s) && std::find(out.measure_again.begin(), out.measure_again.end(),
                                    s.strategy_text) == out.measure_again.end()) {
      out.measure_again.push_back(s.strategy_text);
    }
  }
  return out;
}

}  // namespace autoaccel
