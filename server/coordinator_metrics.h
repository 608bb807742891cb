// The coordinator's Prometheus metrics: what the job manager counts as it
// happens (jobs and trials finished, attempts retried, how long trials
// waited for a gang and ran, store writes) and, at each scrape, the
// scheduler's and the worker pool's state at that moment. Rendered in the
// text exposition format (common/prometheus_text.h) for GET /metrics.
//
// Every family is one row of the table in coordinator_metrics.cc (name,
// type, help and how its samples are read): a new metric is one row there
// plus, for a counted event, one method here. docs/MONITORING.md lists them.
//
// Thread-safe: every method may be called from any thread, with the job
// manager's or the pool's mutex held (it locks only its own, last, and never
// calls out).
#ifndef AUTOACCEL_SERVER_COORDINATOR_METRICS_H_
#define AUTOACCEL_SERVER_COORDINATOR_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/job_state.h"
#include "common/prometheus_text.h"
#include "spec/trial.h"

namespace autoaccel {

// The scheduler at the moment of a scrape (JobManager::Census).
struct SchedulerCensus {
  std::map<JobState, int> unfinished_jobs;  // QUEUED, WAITING_FOR_WORKERS, RUNNING
  int trials_running = 0;                   // their current attempt dispatched
  int trials_queued = 0;                    // retries and confirmations waiting for a gang
  int rank_calls_in_flight = 0;             // RunTrial calls not answered yet
};

// Device types autoaccel_devices has series of (the rest are summed as
// type="other"): 3 series each, whatever the workers register.
inline constexpr int kMaxDeviceTypeSeries = 16;

// The worker pool at the moment of a scrape (WorkerPool::Census).
struct PoolCensus {
  int workers_healthy = 0;  // may get trials
  int workers_quarantined = 0;
  int workers_lost = 0;  // silent past the worker timeout
  struct Devices {
    int free = 0;
    int held = 0;         // by a trial's rank
    int unavailable = 0;  // free, but on a lost or quarantined worker
  };
  std::map<std::string, Devices> devices;  // by device type
};

// The counted events and histograms so far, as one value.
struct MetricCounts {
  std::map<JobState, uint64_t> jobs_finished;
  // By (status, infrastructure): a FAILED trial lost to infrastructure
  // failures after every retry is counted apart from one its strategy failed.
  std::map<std::pair<TrialStatus, bool>, uint64_t> trials_finished;
  uint64_t attempts_retried = 0;
  Histogram dispatch_wait;
  Histogram trial_duration;
  Histogram store_write;
  MetricCounts();
};

class CoordinatorMetrics {
 public:
  // A job ended (SUCCEEDED, FAILED or CANCELLED), an answer from the
  // strategy database included.
  void JobFinished(JobState state);
  // `count` trials reached a terminal status (a search prunes many at
  // once); `infrastructure` for FAILED trials lost to infrastructure
  // failures.
  void TrialFinished(TrialStatus status, bool infrastructure, int count = 1);
  // An attempt failed outside its strategy (its trial runs again or is
  // given up).
  void AttemptFailedOutsideStrategy();
  // A trial attempt was dispatched after waiting `waited` for a gang since
  // it was ready to run (a new proposal: 0).
  void TrialDispatched(absl::Duration waited);
  // A trial that ran ended, `ran` after its last attempt started.
  void TrialRan(absl::Duration ran);
  // One write transaction of the store took `took`, waiting for its lock
  // included.
  void StoreWrite(absl::Duration took);

  MetricCounts Counts() const;
  // The whole exposition.
  std::string Render(const SchedulerCensus& scheduler, const PoolCensus& pool) const;

 private:
  mutable absl::Mutex mu_;
  MetricCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_COORDINATOR_METRICS_H_
