#include "server/coordinator_metrics.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine_version.h"

namespace autoaccel {
namespace {

// The device types of the census as series: the kMaxDeviceTypeSeries - 1
// most numerous, and the rest summed as "other" (workers name their devices'
// types, so a worker could otherwise make a series per device).
std::map<std::string, PoolCensus::Devices> BoundedDeviceTypes(
    const std::map<std::string, PoolCensus::Devices>& devices) {
  if (static_cast<int>(devices.size()) <= kMaxDeviceTypeSeries) return devices;
  std::vector<std::pair<std::string, PoolCensus::Devices>> by_count(devices.begin(), devices.end());
  const auto total = [](const PoolCensus::Devices& d) { return d.free + d.held + d.unavailable; };
  std::stable_sort(by_count.begin(), by_count.end(),
                   [&](const auto& a, const auto& b) { return total(a.second) > total(b.second); });
  std::map<std::string, PoolCensus::Devices> out;
  for (size_t i = 0; i < by_count.size(); ++i) {
    const bool kept = i + 1 < static_cast<size_t>(kMaxDeviceTypeSeries);
    PoolCensus::Devices& d = out[kept ? by_count[i].first : "other"];
    d.free += by_count[i].second.free;
    d.held += by_count[i].second.held;
    d.unavailable += by_count[i].second.unavailable;
  }
  return out;
}

// What one scrape renders from.
struct MetricSources {
  const MetricCounts& counts;
  const SchedulerCensus& scheduler;
  const PoolCensus& pool;
};

// One metric family: its samples are written by `samples` after its HELP
// and TYPE lines.
struct FamilyRow {
  const char* name;
  MetricType type;
  const char* help;
  std::function<void(const MetricSources&, const char* name, PrometheusText*)> samples;
};

constexpr JobState kUnfinishedStates[] = {JobState::kQueued, JobState::kWaitingForWorkers,
                                          JobState::kRunning};
constexpr JobState kFinishedStates[] = {JobState::kSucceeded, JobState::kFailed,
                                        JobState::kCancelled};
constexpr TrialStatus kTerminalStatuses[] = {TrialStatus::kSucceeded, TrialStatus::kOom,
                                             TrialStatus::kFailed,    TrialStatus::kTimeout,
                                             TrialStatus::kPruned,    TrialStatus::kCancelled};

// The trial's outcome label: what its end says about the strategy.
const char* TrialOutcome(TrialStatus status, bool infrastructure) {
  if (status == TrialStatus::kPruned) return "pruned";
  if (status == TrialStatus::kCancelled) return "cancelled";
  if (infrastructure) return "infrastructure";
  return "measured";
}

template <typename K>
uint64_t CountOf(const std::map<K, uint64_t>& counts, const K& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

// Every family the coordinator exports, in exposition order.
const std::vector<FamilyRow>& Families() {
  static const auto* rows = new std::vector<FamilyRow>{
      {"autoaccel_build_info", MetricType::kGauge,
       "Always 1; labels: the build's version and the engine version its trials measure with.",
       [](const MetricSources&, const char* name, PrometheusText* out) {
         out->Sample(
             name,
             {{"version", AUTOACCEL_VERSION}, {"engine_version", absl::StrCat(kEngineVersion)}}, 1);
       }},
      {"autoaccel_jobs", MetricType::kGauge, "Unfinished jobs this coordinator runs, by state.",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         for (JobState state : kUnfinishedStates) {
           auto it = s.scheduler.unfinished_jobs.find(state);
           out->Sample(name, {{"state", std::string(JobStateName(state))}},
                       it == s.scheduler.unfinished_jobs.end() ? 0 : it->second);
         }
       }},
      {"autoaccel_jobs_finished_total", MetricType::kCounter,
       "Jobs that ended since the coordinator started, by final state (answers from the "
       "strategy database included).",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         for (JobState state : kFinishedStates) {
           out->Sample(name, {{"state", std::string(JobStateName(state))}},
                       static_cast<double>(CountOf(s.counts.jobs_finished, state)));
         }
       }},
      {"autoaccel_trials_finished_total", MetricType::kCounter,
       "Trials that reached a final status since the coordinator started, by status and outcome "
       "(measured: the strategy ran and was measured or failed on its own; infrastructure: "
       "failed outside the strategy on every attempt; pruned; cancelled).",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         for (TrialStatus status : kTerminalStatuses) {
           for (bool infrastructure : {false, true}) {
             if (infrastructure && status != TrialStatus::kFailed) continue;
             out->Sample(name,
                         {{"status", std::string(TrialStatusName(status))},
                          {"outcome", TrialOutcome(status, infrastructure)}},
                         static_cast<double>(CountOf(s.counts.trials_finished,
                                                     std::make_pair(status, infrastructure))));
           }
         }
       }},
      {"autoaccel_trial_attempts_failed_outside_strategy_total", MetricType::kCounter,
       "Trial attempts that failed for a reason outside their strategy (rendezvous, worker lost, "
       "port in use, ...); each runs again or, after the last attempt, is given up.",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->Sample(name, {}, static_cast<double>(s.counts.attempts_retried));
       }},
      {"autoaccel_trials_running", MetricType::kGauge,
       "Trials whose current attempt was dispatched to a gang and has not ended.",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->Sample(name, {}, s.scheduler.trials_running);
       }},
      {"autoaccel_trials_queued", MetricType::kGauge,
       "Trials waiting for a free gang: retries and confirmations (new proposals are made only "
       "when a gang is free).",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->Sample(name, {}, s.scheduler.trials_queued);
       }},
      {"autoaccel_rank_calls_in_flight", MetricType::kGauge,
       "RunTrial calls sent to workers and not answered yet (one per rank).",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->Sample(name, {}, s.scheduler.rank_calls_in_flight);
       }},
      {"autoaccel_dispatch_wait_seconds", MetricType::kHistogram,
       "How long a trial attempt waited for a gang from the moment it was ready to run (a retry "
       "or confirmation from being queued; a new proposal, made when a gang is free, waits 0).",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->HistogramSamples(name, {}, s.counts.dispatch_wait);
       }},
      {"autoaccel_trial_duration_seconds", MetricType::kHistogram,
       "How long trials that ran took, from the start of their last attempt to their end.",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->HistogramSamples(name, {}, s.counts.trial_duration);
       }},
      {"autoaccel_store_write_seconds", MetricType::kHistogram,
       "How long each write transaction of the SQLite store took, waiting for its lock included.",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->HistogramSamples(name, {}, s.counts.store_write);
       }},
      {"autoaccel_workers", MetricType::kGauge,
       "Registered workers by state (healthy: may get trials; quarantined: too many failures "
       "outside their trials' strategies in a row; lost: silent past --worker-timeout).",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         out->Sample(name, {{"state", "healthy"}}, s.pool.workers_healthy);
         out->Sample(name, {{"state", "quarantined"}}, s.pool.workers_quarantined);
         out->Sample(name, {{"state", "lost"}}, s.pool.workers_lost);
       }},
      {"autoaccel_devices", MetricType::kGauge,
       "Devices of the registered workers by type and state (held: by a trial's rank; "
       "unavailable: on a lost or quarantined worker); beyond the most numerous types, the "
       "rest under type=\"other\".",
       [](const MetricSources& s, const char* name, PrometheusText* out) {
         for (const auto& [type, d] : BoundedDeviceTypes(s.pool.devices)) {
           out->Sample(name, {{"type", type}, {"state", "free"}}, d.free);
           out->Sample(name, {{"type", type}, {"state", "held"}}, d.held);
           out->Sample(name, {{"type", type}, {"state", "unavailable"}}, d.unavailable);
         }
       }},
  };
  return *rows;
}

}  // namespace

MetricCounts::MetricCounts()
    : dispatch_wait({0.01, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800}),
      trial_duration({1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600}),
      store_write({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}) {}

void CoordinatorMetrics::JobFinished(JobState state) {
  absl::MutexLock lock(&mu_);
  ++counts_.jobs_finished[state];
}

void CoordinatorMetrics::TrialFinished(TrialStatus status, bool infrastructure, int count) {
  absl::MutexLock lock(&mu_);
  counts_.trials_finished[{status, infrastructure && status == TrialStatus::kFailed}] += count;
}

void CoordinatorMetrics::AttemptFailedOutsideStrategy() {
  absl::MutexLock lock(&mu_);
  ++counts_.attempts_retried;
}

void CoordinatorMetrics::TrialDispatched(absl::Duration waited) {
  absl::MutexLock lock(&mu_);
  counts_.dispatch_wait.Observe(absl::ToDoubleSeconds(waited));
}

void CoordinatorMetrics::TrialRan(absl::Duration ran) {
  absl::MutexLock lock(&mu_);
  counts_.trial_duration.Observe(absl::ToDoubleSeconds(ran));
}

void CoordinatorMetrics::StoreWrite(absl::Duration took) {
  absl::MutexLock lock(&mu_);
  counts_.store_write.Observe(absl::ToDoubleSeconds(took));
}

MetricCounts CoordinatorMetrics::Counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::string CoordinatorMetrics::Render(const SchedulerCensus& scheduler,
                                       const PoolCensus& pool) const {
  const MetricCounts counts = Counts();
  const MetricSources sources{counts, scheduler, pool};
  PrometheusText out;
  for (const FamilyRow& row : Families()) {
    out.Family(row.name, row.type, row.help);
    row.samples(sources, row.name, &out);
  }
  return out.text();
}

}  // namespace autoaccel
