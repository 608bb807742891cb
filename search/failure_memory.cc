#include "search/failure_memory.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace autoaccel {

std::vector<std::string> FailureMemory::Values(const Strategy& s) {
  return absl::StrSplit(StrategyToText(s), ',', absl::SkipEmpty());
}

namespace {

// A value's dimension: "sharding" of "sharding=zero1".
std::string Dimension(const std::string& value) { return value.substr(0, value.find('=')); }

// The pairs of values of different dimensions in `values`, as "a|b" with
// a < b.
std::set<std::string> Pairs(const std::vector<std::string>& values) {
  std::set<std::string> out;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = 0; j < values.size(); ++j) {
      if (values[i] < values[j] && Dimension(values[i]) != Dimension(values[j])) {
        out.insert(absl::StrCat(values[i], "|", values[j]));
      }
    }
  }
  return out;
}

}  // namespace

bool FailingValue::In(const std::vector<std::string>& strategy_values) const {
  return std::all_of(values.begin(), values.end(), [&](const std::string& v) {
    return std::find(strategy_values.begin(), strategy_values.end(), v) != strategy_values.end();
  });
}

std::vector<FailingValue> FailureMemory::Succeeded(const Strategy& s) {
  const std::vector<std::string> values = Values(s);
  for (const std::string& v : values) succeeded_.insert(v);
  for (const std::string& p : Pairs(values)) succeeded_pairs_.insert(p);
  return Qualifying();
}

std::vector<FailingValue> FailureMemory::Failed(const Strategy& s, const std::string& reason) {
  const std::string key = ReasonKey(reason);
  failures_[key].push_back(Values(s));
  summaries_[key] = ReasonSummary(reason, 200);
  return Qualifying();
}

std::vector<FailingValue> FailureMemory::Qualifying() {
  const auto dimension = Dimension;
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
      out.push_back({{value},
                     absl::StrCat(kPrunedByFailures, ": ", value, " failed in ", n,
                                  " trials and never succeeded (", summaries_[key], ")")});
    }
  }
  std::vector<FailingValue> pairs = QualifyingPairs();
  out.insert(out.end(), pairs.begin(), pairs.end());
  return out;
}

std::vector<FailingValue> FailureMemory::QualifyingPairs() {
  std::vector<FailingValue> out;
  for (const auto& [key, trials] : failures_) {
    std::map<std::string, int> count;  // pair -> failures with it
    for (const auto& values : trials) {
      for (const std::string& p : Pairs(values)) ++count[p];
    }
    for (const auto& [pair, n] : count) {
      if (n < kFailuresToPrune || failing_.count(pair) || succeeded_pairs_.count(pair)) continue;
      const std::vector<std::string> both = absl::StrSplit(pair, '|');
      if (!succeeded_.count(both[0]) || !succeeded_.count(both[1])) continue;
      // What the failures with the pair share: no unproven value, and no
      // other pair that never succeeded together.
      std::map<std::string, int> shared_values, shared_pairs;
      for (const auto& values : trials) {
        if (!FailingValue{both, ""}.In(values)) continue;
        for (const std::string& v : values) ++shared_values[v];
        for (const std::string& p : Pairs(values)) ++shared_pairs[p];
      }
      bool alone = true;
      for (const auto& [v, m] : shared_values) alone = alone && (m < n || succeeded_.count(v));
      for (const auto& [p, m] : shared_pairs) {
        alone = alone && (p == pair || m < n || succeeded_pairs_.count(p));
      }
      if (!alone) continue;
      failing_.insert(pair);
      out.push_back({both, absl::StrCat(kPrunedByFailingPair, ": ", both[0], " with ", both[1],
                                        " failed in ", n,
                                        " trials and never succeeded together, though each "
                                        "did without the other (",
                                        summaries_[key], ")")});
    }
  }
  return out;
}

}  // namespace autoaccel
