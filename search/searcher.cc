#include "search/searcher.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "search/proxy_extrapolation.h"
#include "search/searcher_internal.h"

namespace autoaccel {
namespace search_internal {

CandidateSearcher::CandidateSearcher(SearchSetup setup)
    : setup_(std::move(setup)), clock_(setup_.clock != nullptr ? setup_.clock : RealClock()) {
  candidates_.reserve(setup_.candidates.size());
  for (const Strategy& s : setup_.candidates) {
    if (!index_.emplace(StrategyToText(s), static_cast<int>(candidates_.size())).second) continue;
    Candidate c;
    c.strategy = s;
    candidates_.push_back(std::move(c));
  }
  setup_.candidates.clear();  // candidates_ holds them now
  if (HasModel()) {
    // The pool's devices became known after the space was built.
    TrainingSetup device;
    SetDeviceFacts(setup_.cost_model->device(), &device);
    for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
      const absl::Status supported = CheckDeviceRules(device, candidates_[i].strategy);
      if (!supported.ok()) Prune(i, absl::StrCat(kPrunedUnsupported, ": ", supported.message()));
    }
  }
  RefreshPredictions();
}

int CandidateSearcher::IndexOf(const Strategy& s) const {
  auto it = index_.find(StrategyToText(s));
  return it == index_.end() ? -1 : it->second;
}

void CandidateSearcher::Prune(int index, std::string reason) {
  Candidate& c = candidates_[index];
  if (c.state != State::kOpen) return;
  c.state = State::kPruned;
  pruned_.push_back(PrunedStrategy{c.strategy, std::move(reason)});
}

void CandidateSearcher::RefreshPredictions() {
  if (!HasModel()) return;
  const CostModel& model = *setup_.cost_model;
  // Unchanged fit, unchanged predictions: a long job's results mostly leave
  // the fit as it was (search/cost_model.h kRefitGrowth), and re-predicting
  // every open candidate at each was most of the coordinator's time.
  if (refreshed_at_fit_ == model.fits()) return;
  refreshed_at_fit_ = model.fits();
  for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
    Candidate& c = candidates_[i];
    // A measured candidate (halving measures some twice) keeps running.
    if (c.state != State::kOpen || c.result) continue;
    std::string reason;
    if (!model.Fits(c.strategy, setup_.memory_margin, &reason)) {
      Prune(i, absl::StrCat(kPrunedNotFitting, ": ", reason));
      continue;
    }
    c.predicted_tokens_per_second = model.Predict(c.strategy).tokens_per_second;
  }
}

std::vector<int> CandidateSearcher::OpenByPrediction() const {
  std::vector<int> open;
  for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
    if (candidates_[i].state == State::kOpen) open.push_back(i);
  }
  std::stable_sort(open.begin(), open.end(), [this](int a, int b) {
    return candidates_[a].predicted_tokens_per_second > candidates_[b].predicted_tokens_per_second;
  });
  return open;
}

bool CandidateSearcher::BudgetSpent() const {
  return (setup_.budget.max_trials > 0 && proposed_ >= setup_.budget.max_trials) ||
         clock_->Now() >= setup_.budget.deadline;
}

bool CandidateSearcher::Exhausted() const {
  return std::none_of(candidates_.begin(), candidates_.end(),
                      [](const Candidate& c) { return c.state == State::kOpen; });
}

bool CandidateSearcher::Finished() const { return BudgetSpent() || Exhausted(); }

std::optional<Proposal> CandidateSearcher::Next() {
  if (Finished()) return std::nullopt;
  std::optional<Proposal> p = Choose();
  if (!p) return std::nullopt;
  const int index = IndexOf(p->strategy);
  if (index >= 0) {
    Candidate& c = candidates_[index];
    c.state = State::kRunning;
    ++c.proposals;
  }
  if (HasModel()) p->predicted = setup_.cost_model->PredictTrial(p->strategy);
  ++proposed_;
  ++running_;
  return p;
}

std::vector<PrunedStrategy> CandidateSearcher::TakePruned() {
  std::vector<PrunedStrategy> out;
  out.swap(pruned_);
  return out;
}

void CandidateSearcher::Report(const ScoredTrial& measured) {
  if (running_ > 0) --running_;
  // What ranks it: the measurement, or in proxy mode the full run's figures
  // extrapolated from it once the model has learnt from it.
  ScoredTrial trial = measured;
  if (trial.status == TrialStatus::kSucceeded && HasModel()) {
    setup_.cost_model->Observe(trial.strategy, trial.metrics);
    if (setup_.cost_model->proxy() != nullptr) {
      absl::StatusOr<Extrapolation> e =
          Extrapolate(*setup_.cost_model, trial.strategy, trial.metrics);
      if (e.ok()) {
        trial.metrics = e->metrics;
      } else {
        trial.status = TrialStatus::kFailed;
        trial.reason = std::string(e.status().message());
      }
    }
  }
  reported_.push_back(trial);
  const int index = IndexOf(trial.strategy);
  if (index < 0) return;
  Candidate& c = candidates_[index];
  c.state = State::kDone;
  c.result = trial;
  if (trial.status == TrialStatus::kSucceeded && HasModel()) RefreshPredictions();
  std::vector<FailingValue> failing;
  if (trial.status == TrialStatus::kSucceeded) failing = failures_.Succeeded(trial.strategy);
  if (trial.status == TrialStatus::kFailed) {
    failing = failures_.Failed(trial.strategy, trial.reason);
  }
  for (const FailingValue& f : failing) {
    for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
      if (candidates_[i].state != State::kOpen) continue;
      if (f.In(FailureMemory::Values(candidates_[i].strategy))) Prune(i, f.prune_reason);
    }
  }
  if (trial.status == TrialStatus::kOom) {
    const std::string reason =
        absl::StrCat(kPrunedByOom, ": needs at least as much memory as ",
                     StrategyToText(trial.strategy), ", which ran out of memory");
    for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
      if (i != index && candidates_[i].state == State::kOpen &&
          NeedsAtLeastAsMuchMemory(candidates_[i].strategy, trial.strategy)) {
        Prune(i, reason);
      }
    }
    // The model learns that this much did not fit; what it now predicts not
    // to fit is pruned too.
    if (HasModel()) {
      setup_.cost_model->Observe(trial.strategy, trial.metrics, TrialStatus::kOom);
      RefreshPredictions();
    }
  }
  OnReport(index, trial);
}

void CandidateSearcher::Resume(const std::vector<ResumedTrial>& trials) {
  std::set<std::string> pruned_before;
  for (const ResumedTrial& r : trials) {
    const int index = IndexOf(r.trial.strategy);
    if (r.trial.status == TrialStatus::kPruned) {
      // Recorded already: pruned here too, but not handed out again.
      pruned_before.insert(StrategyToText(r.trial.strategy));
      if (index >= 0 && candidates_[index].state == State::kOpen) {
        candidates_[index].state = State::kPruned;
      }
      continue;
    }
    if (index >= 0) {
      candidates_[index].state = State::kRunning;
      ++candidates_[index].proposals;
    }
    ++proposed_;
    ++running_;
  }
  pruned_.erase(std::remove_if(pruned_.begin(), pruned_.end(),
                               [&pruned_before](const PrunedStrategy& p) {
                                 return pruned_before.count(StrategyToText(p.strategy)) > 0;
                               }),
                pruned_.end());
  for (const ResumedTrial& r : trials) {
    if (r.trial.status != TrialStatus::kPruned && IsTerminal(r.trial.status)) Report(r.trial);
  }
  OnResume(trials);
}

std::optional<ScoredTrial> CandidateSearcher::Best() const {
  return SelectBest(reported_, setup_.memory_limit_bytes);
}

namespace {

// ------------------------------------------------------------- exhaustive

class ExhaustiveSearcher : public CandidateSearcher {
 public:
  using CandidateSearcher::CandidateSearcher;

 private:
  std::optional<Proposal> Choose() override {
    while (next_ < candidates_.size() && candidates_[next_].state != State::kOpen) ++next_;
    if (next_ >= candidates_.size()) return std::nullopt;
    return Proposal{candidates_[next_++].strategy, 0, std::nullopt};
  }
  size_t next_ = 0;
};

// ----------------------------------------------------------------- greedy

class GreedySearcher : public CandidateSearcher {
 public:
  explicit GreedySearcher(SearchSetup setup) : CandidateSearcher(std::move(setup)) {
    if (setup_.start) center_ = IndexOf(*setup_.start);
  }

 private:
  // The centre is the best strategy measured since the last (re)start; before
  // any, the start point itself (the user's, or the model's best guess).
  std::optional<Proposal> Choose() override {
    if (center_ >= 0) {
      if (candidates_[center_].state == State::kOpen) {
        return Proposal{candidates_[center_].strategy, 0, std::nullopt};
      }
      for (int i : OpenByPrediction()) {
        if (StrategyDistance(candidates_[i].strategy, candidates_[center_].strategy) == 1) {
          return Proposal{candidates_[i].strategy, 0, std::nullopt};
        }
      }
      // A local optimum, unless a trial in flight may still move the centre.
      if (running_ > 0) return std::nullopt;
    }
    // (Re)start from the best predicted candidate not yet measured.
    const std::vector<int> open = OpenByPrediction();
    if (open.empty()) return std::nullopt;
    center_ = open.front();
    return Proposal{candidates_[center_].strategy, 0, std::nullopt};
  }

  void OnReport(int index, const ScoredTrial& trial) override {
    if (center_ < 0 || index == center_ || !IsEligible(trial, setup_.memory_limit_bytes)) return;
    if (StrategyDistance(candidates_[index].strategy, candidates_[center_].strategy) > 1) return;
    const std::optional<ScoredTrial>& current = candidates_[center_].result;
    if (!current || !IsEligible(*current, setup_.memory_limit_bytes) ||
        trial.metrics.tokens_per_second > current->metrics.tokens_per_second) {
      center_ = index;
    }
  }

  // The centre goes on from the best strategy measured before (the
  // earlier searcher's centre was the best of its latest start), else from
  // where that searcher started (its first proposal).
  void OnResume(const std::vector<ResumedTrial>& trials) override {
    std::vector<ScoredTrial> ended;
    int first = -1;
    for (const ResumedTrial& r : trials) {
      if (r.trial.status == TrialStatus::kPruned) continue;
      if (first < 0) first = IndexOf(r.trial.strategy);
      if (IsTerminal(r.trial.status)) ended.push_back(r.trial);
    }
    const std::optional<ScoredTrial> best = SelectBest(ended, setup_.memory_limit_bytes);
    if (best) {
      center_ = IndexOf(best->strategy);
    } else if (first >= 0) {
      center_ = first;
    }
  }

  int center_ = -1;
};

// ---------------------------------------------------------------- halving

// Successive halving (Jamieson & Talwalkar) with rate 3: rung r measures its
// strategies with measured_steps / 3^(R-1-r) steps (at least 1), the last
// rung with the job's steps; the best third by measured throughput moves up.
class HalvingSearcher : public CandidateSearcher {
 public:
  static constexpr int kRate = 3;

  explicit HalvingSearcher(SearchSetup setup) : CandidateSearcher(std::move(setup)) {
    // Steps per rung, fewest first: M/9, M/3, M (distinct, at least 1).
    for (int steps = setup_.measured_steps; steps >= 1; steps /= kRate) {
      if (rung_steps_.empty() || steps < rung_steps_.front()) {
        rung_steps_.insert(rung_steps_.begin(), steps);
      }
      if (steps == 1) break;
    }
    // At most three rungs: the job's steps and the two shorter ones below it.
    if (rung_steps_.size() > 3) rung_steps_.erase(rung_steps_.begin(), rung_steps_.end() - 3);
    // How many to start with: the trial budget shared over the rungs
    // (n + n/3 + n/9 + ... <= max_trials), else every candidate.
    const int open = static_cast<int>(OpenByPrediction().size());
    int first = open;
    if (setup_.budget.max_trials > 0) {
      double share = 0;
      for (size_t r = 0; r < rung_steps_.size(); ++r) share += std::pow(1.0 / kRate, r);
      first = std::max(1, static_cast<int>(std::floor(setup_.budget.max_trials / share + 1e-9)));
    }
    for (int i : OpenByPrediction()) {
      if (static_cast<int>(rung_.size()) >= first) break;
      rung_.push_back(i);
    }
  }

 private:
  std::optional<Proposal> Choose() override {
    while (true) {
      // Skipped: pruned ones, and (after Resume) those proposed before.
      while (next_ < rung_.size() && candidates_[rung_[next_]].state != State::kOpen) ++next_;
      if (next_ < rung_.size()) {
        return Proposal{candidates_[rung_[next_++]].strategy, rung_steps_[level_], std::nullopt};
      }
      if (running_ > 0 || level_ + 1 >= rung_steps_.size()) return std::nullopt;
      // Promote the best third of the rung's successes.
      std::vector<std::pair<double, int>> measured;
      for (int i : rung_) {
        const Candidate& c = candidates_[i];
        if (c.result && IsEligible(*c.result, setup_.memory_limit_bytes)) {
          measured.emplace_back(c.result->metrics.tokens_per_second, i);
        }
      }
      Promote(std::move(measured));
      if (rung_.empty()) return std::nullopt;
      for (int i : rung_) candidates_[i].state = State::kOpen;  // measured again
    }
  }

  // The next rung: the best third of `measured` (throughput, candidate) of
  // the current one; none left ends the search.
  void Promote(std::vector<std::pair<double, int>> measured) {
    std::stable_sort(measured.begin(), measured.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    const size_t keep = (measured.size() + kRate - 1) / kRate;
    rung_.clear();
    for (size_t k = 0; k < keep; ++k) rung_.push_back(measured[k].second);
    next_ = 0;
    ++level_;
    if (rung_.empty()) level_ = rung_steps_.size();
  }

  // The rung the earlier searcher was on is the highest its trials' steps
  // name; above the first, its members are the best third of the rung below
  // (by the trials recorded there), those not yet proposed open again.
  void OnResume(const std::vector<ResumedTrial>& trials) override {
    size_t top = 0;
    for (const ResumedTrial& r : trials) {
      if (r.trial.status == TrialStatus::kPruned) continue;
      const int steps = r.measured_steps > 0 ? r.measured_steps : setup_.measured_steps;
      for (size_t level = 0; level < rung_steps_.size(); ++level) {
        if (rung_steps_[level] == steps) top = std::max(top, level);
      }
    }
    for (size_t level = 1; level <= top && level_ + 1 < rung_steps_.size(); ++level) {
      std::vector<std::pair<double, int>> measured;
      std::set<int> proposed_here;
      for (const ResumedTrial& r : trials) {
        const int index = IndexOf(r.trial.strategy);
        if (index < 0 || r.trial.status == TrialStatus::kPruned) continue;
        const int steps = r.measured_steps > 0 ? r.measured_steps : setup_.measured_steps;
        if (steps == rung_steps_[level - 1] && IsEligible(r.trial, setup_.memory_limit_bytes)) {
          measured.emplace_back(r.trial.metrics.tokens_per_second, index);
        }
        if (steps == rung_steps_[level]) proposed_here.insert(index);
      }
      Promote(std::move(measured));
      for (int i : rung_) {
        if (!proposed_here.count(i) && candidates_[i].state != State::kPruned) {
          candidates_[i].state = State::kOpen;
        }
      }
    }
  }

  bool Exhausted() const override {
    if (level_ >= rung_steps_.size()) return true;
    if (level_ + 1 < rung_steps_.size()) return false;
    for (size_t k = next_; k < rung_.size(); ++k) {
      if (candidates_[rung_[k]].state == State::kOpen) return false;
    }
    return true;
  }

  // The answer comes from the highest rung that measured a success: a
  // strategy's short early measurement does not compete with the longer
  // ones of the strategies that were promoted.
  std::optional<ScoredTrial> Best() const override {
    int best_steps = -1;
    for (const ScoredTrial& t : reported_) {
      if (IsEligible(t, setup_.memory_limit_bytes)) {
        best_steps = std::max(best_steps, t.metrics.measured_steps);
      }
    }
    std::vector<ScoredTrial> top;
    for (const ScoredTrial& t : reported_) {
      if (t.metrics.measured_steps == best_steps) top.push_back(t);
    }
    return SelectBest(top, setup_.memory_limit_bytes);
  }

  std::vector<int> rung_steps_;
  size_t level_ = 0;
  std::vector<int> rung_;  // candidates of the current rung, in proposal order
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Searcher> NewExhaustiveSearcher(SearchSetup setup) {
  return std::make_unique<ExhaustiveSearcher>(std::move(setup));
}
std::unique_ptr<Searcher> NewGreedySearcher(SearchSetup setup) {
  return std::make_unique<GreedySearcher>(std::move(setup));
}
std::unique_ptr<Searcher> NewHalvingSearcher(SearchSetup setup) {
  return std::make_unique<HalvingSearcher>(std::move(setup));
}

}  // namespace search_internal

namespace {

// Recompute a checkpointing applies, as the share of the layers' activations
// it drops: none 0, selective the attention core of its layers, full all of
// its layers'. Only used to order two strategies by memory.
int ShardingDepth(Sharding s) {
  switch (s) {
    case Sharding::kNone:
      return 0;
    case Sharding::kZero1:
      return 1;
    case Sharding::kZero2:
      return 2;
    case Sharding::kFsdp:
      return 3;
  }
  return 0;
}

// True when b's recompute saves no more memory than a's on every layer.
bool RecomputesAtMostAsMuch(const Strategy& b, const Strategy& a) {
  if (b.checkpointing == Checkpointing::kNone) return true;
  if (a.checkpointing == Checkpointing::kNone) return false;
  if (b.checkpointing == a.checkpointing) return b.checkpoint_percent <= a.checkpoint_percent;
  // Full recompute of at least the layers b recomputes selectively saves more.
  return b.checkpointing == Checkpointing::kSelective && a.checkpointing == Checkpointing::kFull &&
         b.checkpoint_percent <= a.checkpoint_percent;
}

}  // namespace

bool IsEligible(const ScoredTrial& trial, int64_t memory_limit_bytes) {
  if (trial.status != TrialStatus::kSucceeded) return false;
  const double tps = trial.metrics.tokens_per_second;
  if (!std::isfinite(tps) || tps < 0) return false;
  // Faster than the devices' peak allows: the peak or the figure is wrong.
  if (trial.metrics.peak_tflops > 0 && trial.metrics.mfu > 1.0) return false;
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

bool NeedsAtLeastAsMuchMemory(const Strategy& b, const Strategy& a) {
  // Everything but the monotone dimensions must match.
  Strategy b_rest = b, a_rest = a;
  for (Strategy* s : {&b_rest, &a_rest}) {
    s->micro_batch_size = s->grad_accum_steps = 1;
    s->sharding = Sharding::kNone;
    s->checkpointing = Checkpointing::kNone;
    s->checkpoint_percent = 100;
    s->offload = Offload::kNone;
  }
  if (b_rest != a_rest) return false;
  return b.micro_batch_size >= a.micro_batch_size &&
         ShardingDepth(b.sharding) <= ShardingDepth(a.sharding) && RecomputesAtMostAsMuch(b, a) &&
         (b.offload == Offload::kNone || a.offload == Offload::kCpu);
}

int StrategyDistance(const Strategy& a, const Strategy& b) {
  int d = 0;
  d += (a.data_parallel != b.data_parallel || a.tensor_parallel != b.tensor_parallel ||
        a.pipeline_parallel != b.pipeline_parallel || a.context_parallel != b.context_parallel);
  d += a.context_parallel_comm != b.context_parallel_comm;
  d += a.expert_parallel != b.expert_parallel;
  d += a.sharding != b.sharding;
  d += a.sequence_parallel != b.sequence_parallel;
  d += (a.pipeline_schedule != b.pipeline_schedule || a.virtual_stages != b.virtual_stages);
  d += a.micro_batch_size != b.micro_batch_size;
  d += a.precision != b.precision;
  d += (a.checkpointing != b.checkpointing || a.checkpoint_percent != b.checkpoint_percent);
  d += a.attention != b.attention;
  d += a.optimizer != b.optimizer;
  d += a.offload != b.offload;
  return d;
}

absl::string_view SearchAlgorithmName(SearchAlgorithm a) {
  switch (a) {
    case SearchAlgorithm::kAuto:
      return "auto";
    case SearchAlgorithm::kExhaustive:
      return "exhaustive";
    case SearchAlgorithm::kGreedy:
      return "greedy";
    case SearchAlgorithm::kBayes:
      return "bayes";
    case SearchAlgorithm::kHalving:
      return "halving";
  }
  return "?";
}

absl::StatusOr<SearchAlgorithm> ParseSearchAlgorithm(absl::string_view name) {
  for (SearchAlgorithm a :
       {SearchAlgorithm::kAuto, SearchAlgorithm::kExhaustive, SearchAlgorithm::kGreedy,
        SearchAlgorithm::kBayes, SearchAlgorithm::kHalving}) {
    if (name == SearchAlgorithmName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "algorithm: unknown value '", name, "' (allowed: auto, exhaustive, greedy, bayes, halving)"));
}

namespace {

// Seconds a trial is expected to take before any has run: process start and
// model build, plus its steps at the predicted speed.
constexpr double kTrialStartupSeconds = 5;

// Auto's choice: exhaustive when every candidate that is left fits the
// budget (max_trials, and the trials the time limit allows on the parallel
// gangs at the predicted trial length), bayes otherwise.
std::string ChooseAlgorithm(const SearchSetup& setup, int open, double median_step_s,
                            const Clock* clock, SearchAlgorithm* chosen) {
  double room = std::numeric_limits<double>::infinity();
  if (setup.budget.max_trials > 0) room = setup.budget.max_trials;
  if (setup.budget.deadline != absl::InfiniteFuture()) {
    const double seconds =
        std::max(0.0, absl::ToDoubleSeconds(setup.budget.deadline - clock->Now()));
    const double trial_s =
        kTrialStartupSeconds + setup.warmup_steps * median_step_s +
        std::max(setup.measured_steps * median_step_s, setup.min_measured_seconds);
    room = std::min(room, seconds / trial_s * setup.parallel_trials);
  }
  *chosen = open <= room ? SearchAlgorithm::kExhaustive : SearchAlgorithm::kBayes;
  return absl::StrFormat(
      "auto: %s (%d candidates, room for %s)", SearchAlgorithmName(*chosen), open,
      std::isinf(room)
          ? std::string("all trials")
          : absl::StrCat("about ", static_cast<int64_t>(room), " trials by the first estimate"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Searcher>> CreateSearcher(SearchSetup setup) {
  if (setup.candidates.empty()) return absl::InvalidArgumentError("space: must not be empty");
  if (setup.budget.max_trials < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_trials: must be >= 0 (0 = unlimited), got ", setup.budget.max_trials));
  }
  if (setup.memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory_limit_bytes: must be >= 0 (0 = no limit), got ", setup.memory_limit_bytes));
  }
  if (setup.parallel_trials < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel_trials: must be >= 1, got ", setup.parallel_trials));
  }
  if (setup.measured_steps < 1 || setup.warmup_steps < 0) {
    return absl::InvalidArgumentError("measured_steps, warmup_steps: must be >= 1 and >= 0");
  }
  for (size_t i = 0; i < setup.candidates.size(); ++i) {
    const Strategy& s = setup.candidates[i];
    if (s.micro_batch_size <= 0 || s.grad_accum_steps <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("space[", i, "]: sizes must be positive, got ", StrategyToText(s)));
    }
  }
  if (setup.start && std::find(setup.candidates.begin(), setup.candidates.end(), *setup.start) ==
                         setup.candidates.end()) {
    return absl::InvalidArgumentError(absl::StrCat("load_strategy: ", StrategyToText(*setup.start),
                                                   " is not a candidate of the space"));
  }
  if (setup.clock == nullptr) setup.clock = RealClock();
  SearchAlgorithm algorithm = setup.algorithm;
  std::string description(SearchAlgorithmName(algorithm));
  if (algorithm == SearchAlgorithm::kAuto) {
    // The space after memory pruning, and the median predicted step time.
    int open = 0;
    std::vector<double> steps;
    for (const Strategy& s : setup.candidates) {
      if (setup.cost_model && !setup.cost_model->Fits(s, setup.memory_margin, nullptr)) continue;
      ++open;
      if (setup.cost_model) steps.push_back(setup.cost_model->Predict(s).step_time_s);
    }
    double median = 0;
    if (!steps.empty()) {
      std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
      median = steps[steps.size() / 2];
    }
    description = ChooseAlgorithm(setup, open, median, setup.clock, &algorithm);
  }
  std::unique_ptr<Searcher> searcher;
  switch (algorithm) {
    case SearchAlgorithm::kAuto:
    case SearchAlgorithm::kExhaustive:
      searcher = search_internal::NewExhaustiveSearcher(std::move(setup));
      break;
    case SearchAlgorithm::kGreedy:
      searcher = search_internal::NewGreedySearcher(std::move(setup));
      break;
    case SearchAlgorithm::kBayes:
      searcher = search_internal::NewBayesSearcher(std::move(setup));
      break;
    case SearchAlgorithm::kHalving:
      searcher = search_internal::NewHalvingSearcher(std::move(setup));
      break;
  }
  static_cast<search_internal::CandidateSearcher*>(searcher.get())->set_description(description);
  return searcher;
}

absl::StatusOr<std::unique_ptr<Searcher>> CreateExhaustiveSearcher(std::vector<Strategy> space,
                                                                   SearchBudget budget,
                                                                   const Clock* clock,
                                                                   int64_t memory_limit_bytes) {
  SearchSetup setup;
  setup.algorithm = SearchAlgorithm::kExhaustive;
  setup.candidates = std::move(space);
  setup.budget = budget;
  setup.clock = clock;
  setup.memory_limit_bytes = memory_limit_bytes;
  return CreateSearcher(std::move(setup));
}

}  // namespace autoaccel
