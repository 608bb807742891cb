#include "server/job_run.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/trial_reason.h"
#include "search/proxy_extrapolation.h"
#include "search/starting_point.h"

namespace autoaccel {

std::string NextTrialId(const JobRun& job) {
  return absl::StrFormat("%s-t%04d", job.record.job_id, job.trials.size());
}

TrialRun* NewTrial(JobRun* job, const Strategy& strategy) {
  auto trial = std::make_unique<TrialRun>();
  trial->strategy = strategy;
  TrialRecord& rec = trial->record;
  rec.trial_id = NextTrialId(*job);
  rec.index = static_cast<int>(job->trials.size());
  rec.job_id = job->record.job_id;
  rec.attempt = 1;
  rec.strategy_text = StrategyToText(strategy);
  rec.strategy_json = StrategyToJson(strategy).dump();
  job->trials.push_back(std::move(trial));
  return job->trials.back().get();
}

std::vector<TrialRecord> AddPrunedTrials(JobRun* job, std::vector<PrunedStrategy> pruned,
                                         absl::Time now) {
  std::vector<TrialRecord> records;
  if (pruned.empty()) return records;
  records.reserve(pruned.size());
  for (PrunedStrategy& p : pruned) {
    TrialRun* trial = NewTrial(job, p.strategy);
    TrialRecord& rec = trial->record;
    rec.attempt = 0;  // never run
    rec.status = TrialStatus::kPruned;
    rec.reason = std::move(p.reason);
    rec.started_at = rec.finished_at = now;
    records.push_back(rec);
    trial->version = job->version + 1;
  }
  ++job->version;
  return records;
}

std::vector<TrialRun*> AddConfirmations(JobRun* job, int count) {
  if (count <= 0) return {};
  const std::vector<TrialRecord> records = TrialRecords(*job);
  std::vector<std::string> strategies;
  for (const TrialRecord* t : TrialsToConfirm(records, count, 0)) {
    strategies.push_back(t->strategy_text);
  }
  return AddRepeats(job, strategies);
}

TrialRun* AddFullSizeCheck(JobRun* job) {
  for (const auto& t : job->trials) {
    if (t->record.full_size) return nullptr;
  }
  const Answer answer = ChooseAnswer(TrialRecords(*job), 0, ConfirmTolerance(job->spec.request));
  const TrialRun* answering = FindTrial(*job, answer.trial_id);
  if (answering == nullptr) return nullptr;
  TrialRun* check = NewTrial(job, answering->strategy);
  TrialRecord& rec = check->record;
  rec.status = TrialStatus::kPending;
  rec.confirms = answering->record.trial_id;
  rec.full_size = true;
  rec.reason = absl::StrCat("waiting to measure trial ", answering->record.index, " at full size");
  job->confirmations.push_back(check);
  return check;
}

std::vector<TrialRun*> AddRepeats(JobRun* job, const std::vector<std::string>& strategies) {
  std::vector<TrialRun*> added;
  std::vector<TrialRun*> originals;
  for (const std::string& text : strategies) {
    TrialRun* original = nullptr;
    int trials = 0;
    for (const auto& t : job->trials) {
      if (t->record.strategy_text != text || t->record.status == TrialStatus::kPruned) continue;
      ++trials;
      if (original == nullptr && t->record.confirms.empty()) original = t.get();
    }
    if (original != nullptr && trials < kMaxMeasurements) originals.push_back(original);
  }
  for (TrialRun* original : originals) {
    TrialRun* confirm = NewTrial(job, original->strategy);
    TrialRecord& rec = confirm->record;
    rec.status = TrialStatus::kPending;
    rec.confirms = original->record.trial_id;
    rec.reason = absl::StrCat("waiting to measure trial ", original->record.index, " again");
    job->confirmations.push_back(confirm);
    added.push_back(confirm);
  }
  return added;
}

TrialRun* FindTrial(const JobRun& job, const std::string& trial_id) {
  // The id names the index (NextTrialId): found without a scan, called for
  // every rank's answer.
  size_t index = 0;
  const absl::string_view prefix = job.record.job_id;
  absl::string_view rest = trial_id;
  if (absl::ConsumePrefix(&rest, prefix) && absl::ConsumePrefix(&rest, "-t") &&
      absl::SimpleAtoi(rest, &index) && index < job.trials.size() &&
      job.trials[index]->record.trial_id == trial_id) {
    return job.trials[index].get();
  }
  for (const auto& t : job.trials) {
    if (t->record.trial_id == trial_id) return t.get();
  }
  return nullptr;
}

std::vector<TrialRecord> TrialRecords(const JobRun& job) {
  std::vector<TrialRecord> records;
  records.reserve(job.trials.size());
  for (const auto& t : job.trials) records.push_back(t->record);
  return records;
}

TrialWork WorkOf(const JobSpec& spec, const TrialRun& trial) {
  if (spec.proxy && !trial.record.full_size) {
    absl::StatusOr<ProxyTrial> t = spec.proxy->TrialOf(trial.strategy);
    if (t.ok()) {
      return {t->setup.model, t->setup.global_batch_size, t->strategy, t->setup.world_size};
    }
  }
  return {spec.model, spec.global_batch_size, trial.strategy, spec.world_size};
}

ScoredTrial ScoredOf(const TrialRun& trial) {
  ScoredTrial scored;
  scored.strategy = trial.strategy;
  scored.status = trial.record.infrastructure ? TrialStatus::kCancelled : trial.record.status;
  // A proxy trial is told as measured (its searcher extrapolates again).
  scored.metrics = trial.record.proxy ? trial.record.proxy->measured : trial.record.metrics;
  scored.reason = trial.record.reason;
  return scored;
}

namespace {

// The record's figures from `e`, its proxy's measurement `measured`.
void SetExtrapolated(const Extrapolation& e, const TrialMetrics& measured, TrialRecord* r) {
  ProxyMeasurement p;
  p.proxy = e.proxy;
  p.strategy_text = StrategyToText(e.proxy_strategy);
  p.measured = measured;
  p.step_time_low_s = e.step_time_low_s;
  p.step_time_high_s = e.step_time_high_s;
  p.relative_uncertainty = e.relative_uncertainty;
  r->proxy = std::move(p);
  r->metrics = e.metrics;
}

}  // namespace

void ExtrapolateProxyTrial(const CostModel* model, TrialRun* trial) {
  TrialRecord& r = trial->record;
  absl::StatusOr<Extrapolation> e =
      model != nullptr ? Extrapolate(*model, trial->strategy, r.metrics)
                       : absl::FailedPreconditionError(
                             "the proxy trial ended before its job's cost model was rebuilt");
  if (!e.ok()) {
    r.status = TrialStatus::kFailed;
    r.reason = absl::StrCat("not extrapolated to the full run: ", e.status().message());
    return;
  }
  SetExtrapolated(*e, r.metrics, &r);
}

std::vector<TrialRun*> ReextrapolateProxyTrials(const CostModel* model, JobRun* job) {
  std::vector<TrialRun*> changed;
  if (model == nullptr) return changed;
  for (const auto& t : job->trials) {
    TrialRecord& r = t->record;
    if (r.status != TrialStatus::kSucceeded || !r.proxy) continue;
    const TrialMetrics measured = r.proxy->measured;
    absl::StatusOr<Extrapolation> e = Extrapolate(*model, t->strategy, measured);
    if (!e.ok() || e->metrics.step_time_median_s == r.metrics.step_time_median_s) continue;
    SetExtrapolated(*e, measured, &r);
    changed.push_back(t.get());
  }
  if (!changed.empty()) {
    job->answer_shortcut.Forget();
    UpdateAnswerSoFar(job, changed.front()->record);
  }
  return changed;
}

std::string SameFailureEveryTime(const JobRun& job) {
  std::string key;
  int failed = 0;
  for (const auto& t : job.trials) {
    const TrialRecord& r = t->record;
    if (!r.confirms.empty() || r.infrastructure || r.status == TrialStatus::kPruned ||
        !IsTerminal(r.status) || r.status == TrialStatus::kCancelled) {
      continue;
    }
    if (r.status != TrialStatus::kFailed || r.metrics.measured_steps > 0) return "";
    const std::string k = ReasonKey(r.reason);
    if (failed > 0 && k != key) return "";
    key = k;
    if (++failed >= kTrialsToCallItBroken) return key;
  }
  return "";
}

void UpdateAnswerSoFar(JobRun* job, const TrialRecord& ended) {
  if (job->answer_shortcut.NoteIfUnchanged(ended)) return;
  // Only measurements can answer: the (possibly tens of thousands of) pruned
  // candidates are not copied.
  std::vector<TrialRecord> measured;
  for (const auto& t : job->trials) {
    if (t->record.status == TrialStatus::kSucceeded) measured.push_back(t->record);
  }
  const Answer answer = ChooseAnswer(measured, 0, ConfirmTolerance(job->spec.request));
  job->answer_shortcut.Recomputed(answer, measured);
  job->record.best_trial_id = answer.trial_id;
}

std::string WhySearchEnded(const JobRun& job) {
  int run = 0;
  for (const auto& t : job.trials) run += t->record.status != TrialStatus::kPruned;
  if (job.spec.max_trials > 0 && run >= job.spec.max_trials) return "trial budget spent";
  if (job.record.trials_total == static_cast<int>(job.trials.size())) {
    return "every candidate measured or pruned";
  }
  if (job.searcher && job.searcher->Finished()) return "search finished";
  return kSearchStoppedForRepeats;
}

double RecentTrialSeconds(const JobRun& job) {
  std::vector<std::pair<absl::Time, double>> done;  // (finished, seconds)
  for (const auto& t : job.trials) {
    const TrialRecord& r = t->record;
    if (r.status != TrialStatus::kSucceeded) continue;
    done.emplace_back(r.finished_at, absl::ToDoubleSeconds(r.finished_at - r.started_at));
  }
  if (done.empty()) return 0;
  // The last three to finish (called on every dispatch: no full sort).
  const size_t k = std::min<size_t>(3, done.size());
  std::partial_sort(done.begin(), done.begin() + k, done.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<double> recent;
  for (size_t i = 0; i < k; ++i) recent.push_back(done[i].second);
  std::sort(recent.begin(), recent.end());
  return recent[(k - 1) / 2];
}

bool SearchTimeUp(const JobRun& job, absl::Time now, int gangs, int confirm_top) {
  if (confirm_top <= 0) return false;
  int succeeded = 0;
  for (const auto& t : job.trials) {
    succeeded += t->record.status == TrialStatus::kSucceeded && t->record.confirms.empty();
  }
  if (succeeded == 0) return false;  // nothing to confirm yet
  const int repeats = std::min(confirm_top, succeeded);
  // The repeats, a quarter more for safety, and one trial's length for the
  // search trials still running.
  const double reserve =
      RecentTrialSeconds(job) * (1.25 * std::ceil(double(repeats) / std::max(1, gangs)) + 1);
  return now + absl::Seconds(reserve) >= job.record.deadline;
}

bool RepeatRoundFits(const JobRun& job, absl::Time now, int gangs, int count) {
  const double round =
      RecentTrialSeconds(job) * 1.25 * std::ceil(double(count) / std::max(1, gangs));
  return now + absl::Seconds(round) < job.record.deadline;
}

void BeginAttempt(JobRun* job, TrialRun* trial, Gang gang, absl::Time now) {
  TrialRecord& rec = trial->record;
  trial->ranks.clear();
  for (PlacedRank& placed : gang.ranks) trial->ranks.push_back(Rank{std::move(placed), false, {}});
  trial->ranks_pending = static_cast<int>(trial->ranks.size());
  trial->master_host = gang.master_host;
  trial->master_port = gang.master_port;
  trial->infrastructure_failure.reset();
  rec.status = TrialStatus::kRunning;
  rec.started_at = now;
  rec.finished_at = absl::InfinitePast();
  std::vector<std::string> worker_ids;
  for (const Rank& rank : trial->ranks) worker_ids.push_back(rank.placed.worker_id);
  rec.worker_id = absl::StrJoin(worker_ids, ",");
  if (rec.attempt > 1) {
    rec.reason = absl::StrCat("attempt ", rec.attempt, " after a failure outside the strategy");
  }
  ++job->running;
}

int MarkRanksLost(TrialRun* trial, const std::string& worker_id) {
  int first = -1;
  for (int r = 0; r < static_cast<int>(trial->ranks.size()); ++r) {
    Rank& rank = trial->ranks[r];
    if (rank.placed.worker_id != worker_id || rank.finished) continue;
    if (first < 0) first = r;
    rank.finished = true;
    --trial->ranks_pending;
  }
  return first;
}

bool QueueRetry(JobRun* job, TrialRun* trial, int max_attempts, absl::Time now) {
  TrialRecord& rec = trial->record;
  const std::string why = trial->infrastructure_failure->reason;
  rec.failed_attempts.push_back(absl::StrCat("attempt ", rec.attempt, ": ", why));
  if (rec.attempt >= max_attempts || now >= job->record.deadline) {
    rec.infrastructure = true;
    return false;
  }
  rec.status = TrialStatus::kPending;
  rec.reason = absl::StrCat("attempt ", rec.attempt, " failed outside the strategy (", why,
                            "); waiting for attempt ", rec.attempt + 1);
  rec.finished_at = absl::InfinitePast();
  trial->infrastructure_failure.reset();
  --job->running;
  job->retries.push_back(trial);
  trial->ready_since = now;
  return true;
}

void CloseTrial(JobRun* job, TrialRun* trial, TrialStatus status, const std::string& reason,
                const TrialMetrics& metrics, absl::Time now) {
  TrialRecord& rec = trial->record;
  if (rec.status == TrialStatus::kRunning) {
    --job->running;
  } else if (rec.status == TrialStatus::kPending) {  // waiting for a retry or to confirm
    job->retries.erase(std::remove(job->retries.begin(), job->retries.end(), trial),
                       job->retries.end());
    job->confirmations.erase(
        std::remove(job->confirmations.begin(), job->confirmations.end(), trial),
        job->confirmations.end());
  }
  rec.status = status;
  rec.reason = reason;
  rec.metrics = metrics;
  rec.finished_at = now;
}

absl::StatusOr<std::string> PrepareSearch(const JobRun& job, const DeviceSpec& device, int pool,
                                          double confirm_reserve, const Clock* clock,
                                          SearchSetup* setup) {
  const JobSpec& spec = job.spec;
  setup->algorithm = spec.algorithm;
  setup->cost_model.emplace(spec.model, spec.seq_len, spec.global_batch_size, device);
  if (job.earlier) setup->cost_model->WarmStart(job.earlier->trials);
  setup->budget.deadline = job.record.deadline - (job.record.deadline - job.record.created_at) *
                                                     std::clamp(confirm_reserve, 0.0, 1.0);
  setup->budget.max_trials = spec.max_trials;
  setup->parallel_trials = std::max(1, pool / spec.TrialRanks());
  if (spec.proxy) setup->cost_model->UseProxy(*spec.proxy);
  setup->warmup_steps = spec.warmup_steps;
  setup->measured_steps = spec.measured_steps;
  setup->min_measured_seconds = spec.min_measured_seconds;
  setup->clock = clock;
  if (spec.load) return SetUpLoadedSearch(*spec.load, spec.finetune, spec.space, setup);
  setup->candidates = spec.space;
  return std::string();
}

std::string WarmStartNote(int trials, const std::string& device_type) {
  if (trials <= 0) return "";
  return absl::StrCat("; cost model warmed by ", trials, " earlier trial", trials == 1 ? "" : "s",
                      " on ", device_type, " devices");
}

AttemptVerdict ApplyRankAnswer(TrialRun* trial, int rank_index, RankOutcome outcome,
                               const TrialMetrics& metrics,
                               const std::vector<MeasurementLimits>& limits) {
  Rank& rank = trial->ranks[rank_index];
  const std::string& worker = rank.placed.worker_id;
  // "rank 1 on worker w2: " for a rank of a multi-rank trial; a single
  // rank's reason names the worker only where the worker said nothing.
  const bool timed_out_rpc = outcome.status == TrialStatus::kTimeout && outcome.reason.empty();
  if (trial->ranks.size() > 1) {
    outcome.reason = absl::StrCat("rank ", rank_index, " on worker ", worker, ": ",
                                  timed_out_rpc ? "no answer before the deadline" : outcome.reason);
  } else if (timed_out_rpc) {
    outcome.reason = absl::StrCat("no answer from worker ", worker, " before the deadline");
  } else if (outcome.infrastructure && !absl::StartsWith(outcome.reason, "worker ")) {
    outcome.reason = absl::StrCat("worker ", worker, ": ", outcome.reason);
  }
  AttemptVerdict verdict;
  switch (outcome.status) {
    case TrialStatus::kSucceeded:
      rank.metrics = metrics;
      break;
    case TrialStatus::kCancelled:
      // Cancelled by us after a sibling's infrastructure failure; or by its
      // worker (shutting down), which is one too.
      if (!trial->infrastructure_failure) {
        outcome.status = TrialStatus::kFailed;
        outcome.infrastructure = true;
        trial->infrastructure_failure = outcome;
        verdict.cancel_others = true;
      }
      break;
    case TrialStatus::kFailed:
      if (outcome.infrastructure) {
        if (!trial->infrastructure_failure) {
          trial->infrastructure_failure = outcome;
          verdict.cancel_others = true;
        }
        break;
      }
      [[fallthrough]];
    default:
      // The strategy's own outcome (OOM, its error, a timeout) ends the
      // trial at once, whatever its siblings say later.
      verdict.kind = AttemptVerdict::kEnd;
      verdict.status = outcome.status;
      verdict.reason = outcome.reason;
      verdict.metrics = metrics;
      return verdict;
  }
  if (trial->ranks_pending > 0) return verdict;
  if (trial->infrastructure_failure) {
    verdict.kind = AttemptVerdict::kRetry;
    return verdict;
  }
  verdict.kind = AttemptVerdict::kEnd;
  for (size_t r = 0; r < trial->ranks.size(); ++r) {
    const Rank& each = trial->ranks[r];
    if (!each.metrics) continue;
    const std::string impossible = ImpossibleMeasurement(
        *each.metrics, r < limits.size() ? limits[r] : MeasurementLimits(), r == 0);
    if (impossible.empty()) continue;
    verdict.status = TrialStatus::kFailed;
    verdict.reason =
        trial->ranks.size() > 1
            ? absl::StrCat("rank ", r, " on worker ", each.placed.worker_id, ": ", impossible)
            : absl::StrCat(impossible, " (worker ", each.placed.worker_id, ")");
    verdict.distrusted_worker = each.placed.worker_id;
    return verdict;
  }
  const TrialMetrics gang = GangMetrics(*trial);
  verdict.status = TrialStatus::kSucceeded;
  verdict.reason = MfuAbovePeak(gang);
  verdict.metrics = gang;
  return verdict;
}

TrialMetrics GangMetrics(const TrialRun& trial) {
  // Rank 0 measures the gang's throughput and step times (the slowest rank's,
  // which every rank reports); memory and communication time are the worst
  // rank's.
  TrialMetrics out =
      trial.ranks.empty() || !trial.ranks[0].metrics ? TrialMetrics() : *trial.ranks[0].metrics;
  out.rank_peak_memory_bytes.assign(trial.ranks.size(), 0);
  out.peak_memory_bytes = 0;
  for (size_t i = 0; i < trial.ranks.size(); ++i) {
    if (!trial.ranks[i].metrics) continue;
    const TrialMetrics& m = *trial.ranks[i].metrics;
    out.rank_peak_memory_bytes[i] = m.peak_memory_bytes;
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, m.peak_memory_bytes);
    out.peak_rss_bytes = std::max(out.peak_rss_bytes, m.peak_rss_bytes);
    out.comm_time_s = std::max(out.comm_time_s, m.comm_time_s);
    out.state_memory_bytes = std::max(out.state_memory_bytes, m.state_memory_bytes);
  }
  return out;
}

}  // namespace autoaccel
