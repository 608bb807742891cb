#include "search/failure_memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace autoaccel {

std::vector<std::string> FailureMemory::Values(const Strategy& s) {
  return absl::StrSplit(StrategyToText(s), ',', absl::SkipEmpty());
}

std::vector<FailingValue> FailureMemory::Succeeded(const Strategy& s) {
  for (std::string& v : Values(s)) succeeded_.insert(std::move(v));
  return Qualifying();
}

std::vector<FailingValue> FailureMemory::Failed(const Strategy& s, const std::string& reason) {
  const std::string key = ReasonKey(reason);
  failures_[key].push_back(Values(s));
  summaries_[key] = ReasonSummary(reason, 200);
  return Qualifying();
}

std::vector<FailingValue> FailureMemory::Qualifying() {
  // A value's dimension: "sharding" of "sharding=zero1".
  const auto dimension = [](const std::string& v) { return v.substr(0, v.find('=')); };
  std::vector<FailingValue> out;
  for (const auto& [key, trials] : failures_) {
    std::map<std::string, int> count;
    for (const auto& values : trials) {
      for (const std::string& v : values) ++count[v];
    }
    for (const auto& [value, n] : count) {
      if (n < kFailuresToPrune || failing_.count(value) || succeeded_.count(value)) continue;
      // Another value of its dimension succeeded.
      bool other = false;
      for (const std::string& v : succeeded_) {
        other = other || (dimension(v) == dimension(value) && v != value);
      }
      if (!other) continue;
      // The only never-succeeded value every one of its failures shares.
      std::map<std::string, int> shared;
      for (const auto& values : trials) {
        if (std::find(values.begin(), values.end(), value) == values.end()) continue;
        for (const std::string& v : values) ++shared[v];
      }
      bool alone = true;
      for (const auto& [v, m] : shared) {
        alone = alone && (v == value || m < n || succeeded_.count(v));
      }
      if (!alone) continue;
      failing_.insert(value);
      out.push_back({value, absl::StrCat(kPrunedByFailures, ": ", value, " failed in ", n,
                                         " trials and never succeeded (", summaries_[key], ")")});
    }
  }
  return out;
}

}  // namespace autoaccel
