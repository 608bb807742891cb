#include "search/searcher.h"

#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace autoaccel {
namespace {

class ExhaustiveSearcher : public Searcher {
 public:
  ExhaustiveSearcher(std::vector<Strategy> space, SearchBudget budget, const Clock* clock,
                     int64_t memory_limit_bytes)
      : space_(std::move(space)),
        budget_(budget),
        clock_(clock),
        memory_limit_bytes_(memory_limit_bytes) {}

  std::optional<Strategy> Next() override {
    if (Finished()) return std::nullopt;
    ++proposed_;
    return space_[next_++];
  }

  void Report(const ScoredTrial& trial) override { reported_.push_back(trial); }

  bool Finished() const override {
    return next_ >= space_.size() || (budget_.max_trials > 0 && proposed_ >= budget_.max_trials) ||
           clock_->Now() >= budget_.deadline;
  }

  std::optional<ScoredTrial> Best() const override {
    return SelectBest(reported_, memory_limit_bytes_);
  }

 private:
  const std::vector<Strategy> space_;
  const SearchBudget budget_;
  const Clock* const clock_;
  const int64_t memory_limit_bytes_;
  size_t next_ = 0;
  int proposed_ = 0;
  std::vector<ScoredTrial> reported_;
};

}  // namespace

bool IsEligible(const ScoredTrial& trial, int64_t memory_limit_bytes) {
  if (trial.status != TrialStatus::kSucceeded) return false;
  const double tps = trial.metrics.tokens_per_second;
  if (!std::isfinite(tps) || tps < 0) return false;
  return memory_limit_bytes <= 0 || trial.metrics.peak_memory_bytes <= memory_limit_bytes;
}

std::optional<ScoredTrial> SelectBest(const std::vector<ScoredTrial>& trials,
                                      int64_t memory_limit_bytes) {
  const ScoredTrial* best = nullptr;
  for (const ScoredTrial& t : trials) {
    if (!IsEligible(t, memory_limit_bytes)) continue;
    if (best == nullptr || t.metrics.tokens_per_second > best->metrics.tokens_per_second ||
        (t.metrics.tokens_per_second == best->metrics.tokens_per_second &&
         t.metrics.peak_memory_bytes < best->metrics.peak_memory_bytes)) {
      best = &t;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

absl::StatusOr<std::unique_ptr<Searcher>> CreateExhaustiveSearcher(std::vector<Strategy> space,
                                                                   SearchBudget budget,
                                                                   const Clock* clock,
                                                                   int64_t memory_limit_bytes) {
  if (space.empty()) return absl::InvalidArgumentError("space: must not be empty");
  if (budget.max_trials < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_trials: must be >= 0 (0 = unlimited), got ", budget.max_trials));
  }
  if (memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_limit_bytes: must be >= 0 (0 = no limit), got ", memory_limit_bytes));
  }
  std::vector<Strategy> unique;
  std::set<std::string> seen;
  for (size_t i = 0; i < space.size(); ++i) {
    const Strategy& s = space[i];
    if (s.micro_batch_size <= 0 || s.grad_accum_steps <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("space[", i, "]: sizes must be positive, got ", StrategyToText(s)));
    }
    if (seen.insert(StrategyToText(s)).second) unique.push_back(s);
  }
  if (clock == nullptr) clock = RealClock();
  return std::unique_ptr<Searcher>(
      new ExhaustiveSearcher(std::move(unique), budget, clock, memory_limit_bytes));
}

}  // namespace autoaccel
