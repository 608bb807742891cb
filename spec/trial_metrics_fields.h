// TrialMetrics' fields as data: one row per field, with the key that the JSON
// form (trial.cc) and the wire form, v1::TrialMetrics (proto/convert.cc, by
// protobuf reflection on the rows' names), both use. A new metric is a member
// of TrialMetrics, a field in autoaccel.proto and a row here; trial_test
// round-trips every row through JSON and proto_convert_test through the
// wire. Nothing here is mutable; any thread.
#ifndef AUTOACCEL_SPEC_TRIAL_METRICS_FIELDS_H_
#define AUTOACCEL_SPEC_TRIAL_METRICS_FIELDS_H_

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "spec/field_table.h"
#include "spec/trial.h"

namespace autoaccel {

// One field. T is int (the proto's int32), int64_t (int64), double (double)
// or std::vector<int64_t> (repeated int64).
template <typename T>
struct TrialMetricsField {
  using Value = T;
  absl::string_view name;  // JSON key, proto field and C++ member name
  T TrialMetrics::*member;
};

inline constexpr std::tuple kTrialMetricsFields{
    TrialMetricsField<int>{"measured_steps", &TrialMetrics::measured_steps},
    TrialMetricsField<double>{"step_time_median_s", &TrialMetrics::step_time_median_s},
    TrialMetricsField<double>{"step_time_min_s", &TrialMetrics::step_time_min_s},
    TrialMetricsField<double>{"step_time_max_s", &TrialMetrics::step_time_max_s},
    TrialMetricsField<double>{"step_time_spread", &TrialMetrics::step_time_spread},
    TrialMetricsField<double>{"tokens_per_second", &TrialMetrics::tokens_per_second},
    TrialMetricsField<double>{"samples_per_second", &TrialMetrics::samples_per_second},
    TrialMetricsField<double>{"achieved_tflops", &TrialMetrics::achieved_tflops},
    TrialMetricsField<int64_t>{"peak_memory_bytes", &TrialMetrics::peak_memory_bytes},
    TrialMetricsField<int64_t>{"peak_rss_bytes", &TrialMetrics::peak_rss_bytes},
    TrialMetricsField<double>{"final_loss", &TrialMetrics::final_loss},
    TrialMetricsField<double>{"mfu", &TrialMetrics::mfu},
    TrialMetricsField<double>{"peak_tflops", &TrialMetrics::peak_tflops},
    TrialMetricsField<int>{"skipped_steps", &TrialMetrics::skipped_steps},
    TrialMetricsField<double>{"comm_time_s", &TrialMetrics::comm_time_s},
    TrialMetricsField<int64_t>{"state_memory_bytes", &TrialMetrics::state_memory_bytes},
    TrialMetricsField<std::vector<int64_t>>{"rank_peak_memory_bytes",
                                            &TrialMetrics::rank_peak_memory_bytes},
};

inline constexpr size_t kNumTrialMetricsFields = std::tuple_size_v<decltype(kTrialMetricsFields)>;

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_TRIAL_METRICS_FIELDS_H_
