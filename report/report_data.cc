#include "report/report_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "proto/convert.h"
#include "search/field_table.h"
#include "search/step_statistics.h"
#include "search/strategy_fields.h"

namespace autoaccel {
namespace {

bool Measured(const v1::Trial& t) {
  return t.status() == "SUCCEEDED" && t.metrics().tokens_per_second() > 0;
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
  std::vector<const v1::Trial*> measured;
  for (const v1::Trial& t : trials) {
    if (Measured(t)) measured.push_back(&t);
  }
  std::stable_sort(measured.begin(), measured.end(), [](const v1::Trial* a, const v1::Trial* b) {
    return a->finished_at() < b->finished_at();
  });
  std::vector<BestSoFarPoint> out;
  for (const v1::Trial* t : measured) {
    if (!out.empty() && t->metrics().tokens_per_second() <= out.back().tokens_per_second) continue;
    out.push_back({SecondsIntoJob(job, *t), t->metrics().tokens_per_second(), t->index(),
                   t->strategy().text()});
  }
  return out;
}

std::vector<PredictedMeasured> PredictionPairs(const std::vector<v1::Trial>& trials) {
  std::vector<PredictedMeasured> out;
  for (const v1::Trial& t : trials) {
    if (t.status() != "SUCCEEDED" || !t.has_predicted()) continue;
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

std::vector<DimensionEffect> DimensionEffects(const std::vector<v1::Trial>& trials) {
  std::vector<std::pair<const v1::Trial*, Strategy>> runs;
  for (const v1::Trial& t : trials) {
    if (t.status() == "PRUNED" || !t.confirms().empty()) continue;
    absl::StatusOr<Strategy> s = FromProto(t.strategy());
    if (s.ok()) runs.emplace_back(&t, *s);
  }
  std::vector<DimensionEffect> out;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    // Keyed by (place in the dimension, spelling).
    std::map<std::pair<double, std::string>, std::pair<ValueEffect, std::vector<double>>> by_value;
    for (const auto& [t, s] : runs) {
      const auto value = s.*field.member;
      auto& [effect, measured] = by_value[{SortKey(field, value), FieldText(field, value)}];
      effect.value = FieldText(field, value);
      ++effect.trials;
      if (t->status() == "OOM") ++effect.out_of_memory;
      if (Measured(*t)) {
        ++effect.succeeded;
        measured.push_back(t->metrics().tokens_per_second());
        effect.best_tokens_per_second =
            std::max(effect.best_tokens_per_second, t->metrics().tokens_per_second());
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
