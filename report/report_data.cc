#include "report/report_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "proto/convert.h"
#include "spec/field_table.h"
#include "spec/step_statistics.h"
#include "spec/strategy_fields.h"

namespace autoaccel {
namespace {

bool Measured(const v1::Trial& t) {
  return TrialStatusOf(t) == TrialStatus::kSucceeded && t.metrics().tokens_per_second() > 0;
}

double JobStart(const v1::Job& job) {
  return job.started_at() > 0 ? job.started_at() : job.created_at();
}

// A value's place in its dimension: a count or flag by itself, an
// enumerator by its declaration order.
template <typename Field, typename T>
double SortKey(const Field& field, T value) {
  if constexpr (std::is_enum_v<T>) {
    for (size_t i = 0; i < field.names.size(); ++i) {
      if (field.names[i].first == value) return static_cast<double>(i);
    }
    return static_cast<double>(field.names.size());
  } else {
    return static_cast<double>(value);
  }
}

}  // namespace

std::vector<ThroughputPoint> MeasuredPoints(const std::vector<v1::Trial>& trials) {
  std::vector<ThroughputPoint> out;
  for (const v1::Trial& t : trials) {
    if (!Measured(t) || t.metrics().peak_memory_bytes() <= 0) continue;
    out.push_back({static_cast<double>(t.metrics().peak_memory_bytes()),
                   t.metrics().tokens_per_second(), t.index(), t.strategy().text()});
  }
  return out;
}

std::vector<ThroughputPoint> ParetoFront(const std::vector<ThroughputPoint>& points) {
  std::vector<ThroughputPoint> sorted = points;
  // Memory ascending, and among equal memory the fastest first, so one pass
  // keeps each point that is faster than everything using less memory.
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ThroughputPoint& a, const ThroughputPoint& b) {
                     if (a.peak_memory_bytes != b.peak_memory_bytes) {
                       return a.peak_memory_bytes < b.peak_memory_bytes;
                     }
                     return a.tokens_per_second > b.tokens_per_second;
                   });
  std::vector<ThroughputPoint> front;
  for (const ThroughputPoint& p : sorted) {
    if (front.empty() || p.tokens_per_second > front.back().tokens_per_second) front.push_back(p);
  }
  return front;
}

double SecondsIntoJob(const v1::Job& job, const v1::Trial& t) {
  if (t.finished_at() <= 0) return 0;
  return std::max(0.0, t.finished_at() - JobStart(job));
}

std::vector<BestSoFarPoint> BestSoFar(const v1::Job& job, const std::vector<v1::Trial>& trials) {
  std::map<int, const v1::Trial*> by_index;
  for (const v1::Trial& t : trials) by_index[t.index()] = &t;
  std::vector<BestSoFarPoint> candidates;
  for (const v1::StrategyStanding& s : job.standings()) {
    if (s.trial_indices().empty()) continue;
    auto first = by_index.find(s.trial_indices(0));
    if (first == by_index.end()) continue;
    candidates.push_back(
        {SecondsIntoJob(job, *first->second), s.figure(), s.trial_indices(0), s.strategy_text()});
  }
  if (job.standings().empty()) {
    for (const v1::Trial& t : trials) {
      if (!Measured(t)) continue;
      candidates.push_back({SecondsIntoJob(job, t), t.metrics().tokens_per_second(), t.index(),
                            t.strategy().text()});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const BestSoFarPoint& a, const BestSoFarPoint& b) {
                     if (a.seconds != b.seconds) return a.seconds < b.seconds;
                     return a.trial_index < b.trial_index;
                   });
  std::vector<BestSoFarPoint> out;
  for (const BestSoFarPoint& p : candidates) {
    if (!out.empty() && p.tokens_per_second <= out.back().tokens_per_second) continue;
    out.push_back(p);
  }
  return out;
}

std::map<int, const v1::StrategyStanding*> StandingsByTrial(const v1::Job& job) {
  std::map<int, const v1::StrategyStanding*> out;
  for (const v1::StrategyStanding& s : job.standings()) {
    for (int index : s.trial_indices()) out[index] = &s;
  }
  return out;
}

const v1::StrategyStanding* AnswerStanding(const v1::Job& job) {
  for (const v1::StrategyStanding& s : job.standings()) {
    if (s.answer()) return &s;
  }
  return nullptr;
}

const v1::Trial* FasterUnconfirmed(const v1::Job& job, const std::vector<v1::Trial>& trials) {
  const v1::StrategyStanding* answer = AnswerStanding(job);
  if (answer == nullptr) return nullptr;
  const v1::Trial* out = nullptr;
  for (const v1::Trial& t : trials) {
    if (!Measured(t) || t.strategy().text() == answer->strategy_text() ||
        t.metrics().tokens_per_second() <= answer->figure()) {
      continue;
    }
    if (out == nullptr || t.metrics().tokens_per_second() > out->metrics().tokens_per_second()) {
      out = &t;
    }
  }
  return out;
}

std::vector<PredictedMeasured> PredictionPairs(const std::vector<v1::Trial>& trials) {
  std::vector<PredictedMeasured> out;
  for (const v1::Trial& t : trials) {
    if (TrialStatusOf(t) != TrialStatus::kSucceeded || !t.has_predicted()) continue;
    const v1::Prediction& p = t.predicted();
    if (p.step_time_s() <= 0 && p.peak_memory_bytes() <= 0) continue;
    out.push_back({t.index(), t.strategy().text(), p.step_time_s(),
                   t.metrics().step_time_median_s(), static_cast<double>(p.peak_memory_bytes()),
                   static_cast<double>(t.metrics().peak_memory_bytes())});
  }
  return out;
}

double MedianRelativeError(const std::vector<PredictedMeasured>& pairs, bool step) {
  std::vector<double> errors;
  for (const PredictedMeasured& p : pairs) {
    const double predicted = step ? p.predicted_step_s : p.predicted_peak_bytes;
    const double measured = step ? p.measured_step_s : p.measured_peak_bytes;
    if (measured > 0 && predicted > 0) errors.push_back(std::abs(predicted - measured) / measured);
  }
  return Median(std::move(errors));
}

std::vector<DimensionEffect> DimensionEffects(const v1::Job& job,
                                              const std::vector<v1::Trial>& trials) {
  std::vector<std::pair<const v1::Trial*, Strategy>> runs;
  for (const v1::Trial& t : trials) {
    if (TrialStatusOf(t) == TrialStatus::kPruned || !t.confirms().empty()) continue;
    absl::StatusOr<Strategy> s = FromProto(t.strategy());
    if (s.ok()) runs.emplace_back(&t, *s);
  }
  const std::map<int, const v1::StrategyStanding*> standing_of = StandingsByTrial(job);
  const bool ranked = !job.standings().empty();
  std::optional<Strategy> answer;
  if (job.has_best()) {
    absl::StatusOr<Strategy> s = FromProto(job.best().strategy());
    if (s.ok()) answer = *s;
  }
  std::vector<DimensionEffect> out;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    // Keyed by (place in the dimension, spelling).
    std::map<std::pair<double, std::string>, std::pair<ValueEffect, std::vector<double>>> by_value;
    for (const auto& [t, s] : runs) {
      const auto value = s.*field.member;
      auto& [effect, measured] = by_value[{SortKey(field, value), FieldText(field, value)}];
      effect.value = FieldText(field, value);
      effect.answer = answer.has_value() && (*answer).*field.member == value;
      ++effect.trials;
      if (TrialStatusOf(*t) == TrialStatus::kOom) ++effect.out_of_memory;
      if (Measured(*t)) {
        ++effect.succeeded;
        measured.push_back(t->metrics().tokens_per_second());
        double figure = t->metrics().tokens_per_second();
        if (ranked) {
          auto it = standing_of.find(t->index());
          figure = it == standing_of.end() ? 0 : it->second->figure();
        }
        effect.best_tokens_per_second = std::max(effect.best_tokens_per_second, figure);
      }
    }
    DimensionEffect d;
    d.dimension = std::string(field.name);
    for (auto& [key, entry] : by_value) {
      entry.first.median_tokens_per_second = Median(std::move(entry.second));
      d.values.push_back(entry.first);
    }
    out.push_back(std::move(d));
  });
  return out;
}

DeviceMemory JobDeviceMemory(const v1::ListWorkersResponse& workers,
                             const std::vector<v1::Trial>& trials, const std::string& device_type) {
  std::set<std::string> ran;
  for (const v1::Trial& t : trials) ran.insert(t.worker_ids().begin(), t.worker_ids().end());
  if (ran.empty()) return {0, "no trial of this job ran on a worker, so no device is known"};
  const std::string type = device_type.empty() ? "cpu" : device_type;
  DeviceMemory out;
  std::vector<std::string> seen;
  for (const v1::Worker& w : workers.workers()) {
    if (!ran.count(w.worker_id())) continue;
    for (const v1::Device& d : w.devices()) {
      if (d.type() != type || d.memory_bytes() <= 0) continue;
      if (out.bytes == 0 || d.memory_bytes() < out.bytes) out.bytes = d.memory_bytes();
      seen.push_back(absl::StrCat(w.worker_id(), " ", d.type(), ":", d.index()));
    }
  }
  if (out.bytes == 0) {
    out.note =
        absl::StrCat("none of the workers that ran this job's trials (", absl::StrJoin(ran, ", "),
                     ") is registered now with a ", type, " device of known memory");
    return out;
  }
  out.note = absl::StrFormat("the smallest memory of the %s devices that ran this job (%s)", type,
                             absl::StrJoin(seen, ", "));
  return out;
}

}  // namespace autoaccel
