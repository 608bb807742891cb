// Time and cost to train, from a predicted throughput: the arithmetic of
// `autoaccel estimate --tokens N --price-per-gpu-hour P`, its interval, the
// user's inputs (token counts, deadlines) and the choice of a cluster for a
// deadline or a budget. Pure; any thread.
#ifndef AUTOACCEL_COMMON_TRAINING_COST_H_
#define AUTOACCEL_COMMON_TRAINING_COST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace autoaccel {

// The relative band around a predicted step time (and so around days and
// cost to train): the 90th percentile of |predicted - measured| / measured
// step time of the cuda priors on the 41 published runs held out of their
// calibration, docs/BENCHMARKS.md "GPU priors" (2026-11-29: 19.3%; the
// median is 8.8%). Nine in ten of those runs fall inside the band. Update it
// with that table whenever the priors are calibrated again.
inline constexpr double kStepTimeBand = 0.193;
inline constexpr char kStepTimeBandSource[] =
    "the cuda priors' 90th-percentile held-out step-time error, docs/BENCHMARKS.md \"GPU "
    "priors\"";

// A token count: a positive number with an optional decimal suffix K, M, B
// or T (1e3, 1e6, 1e9, 1e12; either case), e.g. "1T", "300B", "2.5e11".
// INVALID_ARGUMENT naming `flag` for anything else, a count under one token
// or above 1e18.
absl::StatusOr<int64_t> ParseTokenCount(absl::string_view flag, absl::string_view text);

// A deadline: whole or fractional days with the suffix "d" ("30d", "1.5d"),
// or a duration common/duration.h parses ("12h", "90m"); in seconds, > 0.
// INVALID_ARGUMENT naming `flag` otherwise.
absl::StatusOr<double> ParseDeadlineSeconds(absl::string_view flag, absl::string_view text);

// Days and (with a price) cost to train `tokens` at `tokens_per_second` on
// `world_size` devices: days = tokens / tokens_per_second / 86400, cost =
// days * 24 * price_per_gpu_hour * world_size; the fast and slow ends from
// an interval of the throughput.
struct TrainingCost {
  double days = 0, days_fast = 0, days_slow = 0;
  bool priced = false;  // a price was known
  double price_per_gpu_hour = 0;
  double cost = 0, cost_low = 0, cost_high = 0;
};
// The ends from an interval of tokens/s (a measurement's, say): days_fast
// at `tokens_per_second_high`, days_slow at `tokens_per_second_low`.
// REQUIRES: 0 < low <= tokens_per_second <= high, tokens > 0, world_size >=
// 1, price_per_gpu_hour >= 0 (0: no price known).
TrainingCost TrainingCostBetween(double tokens_per_second, double tokens_per_second_low,
                                 double tokens_per_second_high, int64_t tokens, int world_size,
                                 double price_per_gpu_hour);
// A prediction's: the step time (so the days) within +-kStepTimeBand, i.e.
// days_fast = days * (1 - kStepTimeBand), days_slow = days * (1 +
// kStepTimeBand). REQUIRES as TrainingCostBetween's.
TrainingCost TrainingCostOf(double tokens_per_second, int64_t tokens, int world_size,
                            double price_per_gpu_hour);

// "$1,234,567": an amount rounded to whole units, thousands grouped.
std::string FormatMoney(double amount);

// What a choice weighs of one cluster: null entries cannot be chosen (no
// strategy to train with).
struct ClusterChoice {
  std::optional<TrainingCost> cost;
};

// The cheapest cluster (by `cost`) whose slow end (days_slow) meets the
// deadline; ties: the faster. Entries without a price cannot be chosen.
std::optional<size_t> CheapestMeetingDeadline(const std::vector<ClusterChoice>& clusters,
                                              double deadline_days);

// The fastest cluster (by `days`) whose high end (cost_high) stays within
// the budget; ties: the cheaper. Entries without a price cannot be chosen.
std::optional<size_t> FastestWithinBudget(const std::vector<ClusterChoice>& clusters,
                                          double budget);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_TRAINING_COST_H_
