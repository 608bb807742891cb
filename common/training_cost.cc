#include "common/training_cost.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/duration.h"

namespace autoaccel {
namespace {

constexpr double kSecondsPerDay = 86400;

absl::Status Bad(absl::string_view flag, absl::string_view text, absl::string_view allowed) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", text, "\" is not ", allowed));
}

}  // namespace

absl::StatusOr<int64_t> ParseTokenCount(absl::string_view flag, absl::string_view text) {
  constexpr absl::string_view kAllowed =
      "a token count (a positive number, optionally with K, M, B or T: 1T = 1e12)";
  absl::string_view number = absl::StripAsciiWhitespace(text);
  double scale = 1;
  if (!number.empty()) {
    switch (absl::ascii_toupper(number.back())) {
      case 'K':
        scale = 1e3;
        break;
      case 'M':
        scale = 1e6;
        break;
      case 'B':
        scale = 1e9;
        break;
      case 'T':
        scale = 1e12;
        break;
      default:
        break;
    }
    if (scale != 1) number.remove_suffix(1);
  }
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !std::isfinite(value)) {
    return Bad(flag, text, kAllowed);
  }
  const double tokens = value * scale;
  if (!(tokens >= 1) || tokens > 1e18) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", text, "\" must be between 1 token and 1e18 tokens"));
  }
  return static_cast<int64_t>(std::llround(tokens));
}

absl::StatusOr<double> ParseDeadlineSeconds(absl::string_view flag, absl::string_view text) {
  constexpr absl::string_view kAllowed =
      "a deadline (days as \"30d\", or a duration such as \"12h\" or \"90m\")";
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  double seconds = 0;
  if (!trimmed.empty() && (trimmed.back() == 'd' || trimmed.back() == 'D')) {
    double days = 0;
    if (!absl::SimpleAtod(trimmed.substr(0, trimmed.size() - 1), &days) || !std::isfinite(days)) {
      return Bad(flag, text, kAllowed);
    }
    seconds = days * kSecondsPerDay;
  } else {
    absl::StatusOr<absl::Duration> d = ParseDuration(trimmed);
    if (!d.ok()) return Bad(flag, text, kAllowed);
    seconds = absl::ToDoubleSeconds(*d);
  }
  if (!(seconds > 0)) return absl::InvalidArgumentError(absl::StrCat(flag, ": must be > 0"));
  return seconds;
}

TrainingCost TrainingCostBetween(double tokens_per_second, double tokens_per_second_low,
                                 double tokens_per_second_high, int64_t tokens, int world_size,
                                 double price_per_gpu_hour) {
  TrainingCost c;
  const auto days = [&](double rate) { return double(tokens) / rate / kSecondsPerDay; };
  c.days = days(tokens_per_second);
  c.days_fast = days(tokens_per_second_high);
  c.days_slow = days(tokens_per_second_low);
  if (price_per_gpu_hour > 0) {
    c.priced = true;
    c.price_per_gpu_hour = price_per_gpu_hour;
    const double per_day = 24 * price_per_gpu_hour * world_size;
    c.cost = c.days * per_day;
    c.cost_low = c.days_fast * per_day;
    c.cost_high = c.days_slow * per_day;
  }
  return c;
}

TrainingCost TrainingCostOf(double tokens_per_second, int64_t tokens, int world_size,
                            double price_per_gpu_hour) {
  return TrainingCostBetween(tokens_per_second, tokens_per_second / (1 + kStepTimeBand),
                             tokens_per_second / (1 - kStepTimeBand), tokens, world_size,
                             price_per_gpu_hour);
}

std::string FormatMoney(double amount) {
  std::string digits = absl::StrFormat("%.0f", std::fabs(amount));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return absl::StrCat(amount < 0 ? "-$" : "$", digits);
}

namespace {

// The index of the priced cluster that `meets` and `before` ranks first.
template <typename Meets, typename Before>
std::optional<size_t> Choose(const std::vector<ClusterChoice>& clusters, Meets meets,
                             Before before) {
  std::optional<size_t> pick;
  for (size_t i = 0; i < clusters.size(); ++i) {
    const std::optional<TrainingCost>& c = clusters[i].cost;
    if (!c || !c->priced || !meets(*c)) continue;
    if (!pick || before(*c, *clusters[*pick].cost)) pick = i;
  }
  return pick;
}

}  // namespace

std::optional<size_t> CheapestMeetingDeadline(const std::vector<ClusterChoice>& clusters,
                                              double deadline_days) {
  return Choose(
      clusters, [&](const TrainingCost& c) { return c.days_slow <= deadline_days; },
      [](const TrainingCost& a, const TrainingCost& b) {
        return a.cost < b.cost || (a.cost == b.cost && a.days < b.days);
      });
}

std::optional<size_t> FastestWithinBudget(const std::vector<ClusterChoice>& clusters,
                                          double budget) {
  return Choose(
      clusters, [&](const TrainingCost& c) { return c.cost_high <= budget; },
      [](const TrainingCost& a, const TrainingCost& b) {
        return a.days < b.days || (a.days == b.days && a.cost < b.cost);
      });
}

}  // namespace autoaccel
