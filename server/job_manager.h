// The coordinator's state: jobs, their trials and the worker pool.
//
// One mutex owns everything; RPC handlers call the public methods from any
// thread, and one scheduler thread (or a test calling Tick()) advances jobs:
// it checks worker health, ends jobs at their deadline, asks each job's
// searcher for strategies and gang-assigns every trial's ranks to free
// devices. Every state change is written to the Store before it is visible.
#ifndef AUTOACCEL_SERVER_JOB_MANAGER_H_
#define AUTOACCEL_SERVER_JOB_MANAGER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/autoaccel.pb.h"
#include "search/model_spec.h"
#include "search/partial_strategy.h"
#include "search/searcher.h"
#include "server/answer.h"
#include "server/rank_outcome.h"
#include "server/rendezvous_ports.h"
#include "server/store.h"

namespace autoaccel {

// How the coordinator reaches a worker's WorkerService. Swappable for tests.
class TrialExecutor {
 public:
  using Done = std::function<void(absl::Status, v1::RunTrialResponse)>;
  virtual ~TrialExecutor() = default;
  // Starts one rank. `done` runs exactly once, on any thread, possibly
  // before RunTrial returns: callers must not hold locks that `done` takes.
  // A non-OK status means the rank's result never came back.
  virtual void RunTrial(const std::string& address, const v1::RunTrialRequest& request,
                        absl::Duration rpc_timeout, Done done) = 0;
  // Best effort; errors are ignored (the worker may be gone).
  virtual void CancelTrial(const std::string& address, const v1::CancelTrialRequest& request) = 0;
};

struct JobManagerOptions {
  absl::Duration heartbeat_interval = absl::Seconds(2);
  // A worker silent for this long is declared lost; its running ranks fail.
  absl::Duration worker_timeout = absl::Seconds(10);
  int default_warmup_steps = 2;
  int default_measured_steps = 5;
  // Timed steps continue until they cover this long (TrialSpec).
  double default_min_measured_seconds = 1.0;
  absl::Duration default_trial_timeout = absl::Minutes(10);
  // Extra time the RPC is allowed beyond the trial's own timeout.
  absl::Duration rpc_grace = absl::Seconds(15);
  absl::Duration tick_interval = absl::Milliseconds(100);
  // Attempts a trial gets when it keeps failing for infrastructure reasons
  // (rendezvous, worker lost, ...); after the last it is given up and the
  // job's answer rests on partial evidence.
  int max_attempts = 3;
  // How long a rendezvous port a trial failed on stays out of use.
  absl::Duration port_quarantine = absl::Minutes(10);
  // Before a job ends, its best this many strategies are measured again
  // (server/answer.h); the search stops at this share of the time limit
  // before the deadline to leave them room.
  int confirm_top = 3;
  double confirm_reserve = 0.15;
};

class JobManager {
 public:
  // `store` and `executor` must outlive the manager. Jobs left unfinished by
  // an earlier server process are marked FAILED (their trials could not be
  // followed across the restart).
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(Store* store, TrialExecutor* executor,
                                                            const Clock* clock,
                                                            JobManagerOptions options);
  ~JobManager();

  // Starts / stops the scheduler thread. Stop() cancels nothing; the server
  // calls Shutdown() first to end running jobs.
  void Start();
  void Stop();
  // Cancels every running job (reason: server shutting down).
  void Shutdown();
  // Waits until every RunTrial sent to a worker has answered, up to
  // `timeout`; returns false if some are still out. Call after Shutdown(),
  // before destroying the executor.
  bool Drain(absl::Duration timeout);

  // Validates and stores a job. INVALID_ARGUMENT naming the field for bad
  // input; nothing is stored then.
  absl::StatusOr<v1::Job> SubmitJob(const v1::TuneRequest& request);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  // The job and its trials changed since `since_version` (0: all of them;
  // PRUNED ones only with `include_pruned`), and in `*version` a counter that
  // grows whenever the job or a trial changes (UINT64_MAX once the job has
  // finished; then every trial run is included again, as what changed since
  // `since_version` is no longer known). NOT_FOUND for an unknown job.
  absl::StatusOr<v1::JobEvent> GetJobEvent(const std::string& job_id, uint64_t since_version,
                                           bool include_pruned, uint64_t* version);
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id);
  // Newest first; `limit` 0 means 50, at most 500 are listed. The jobs'
  // requests come without their config text.
  absl::StatusOr<std::vector<v1::Job>> ListJobs(int limit);
  // Every trial of the job, pruned ones included (for tests and tools in
  // this process; RPCs page with ListTrialsPage).
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(const std::string& job_id);
  // One page of the job's trials in proposal order. INVALID_ARGUMENT for a
  // page size outside 0..5000 or a token this server did not give;
  // NOT_FOUND for an unknown job.
  absl::StatusOr<v1::ListTrialsResponse> ListTrialsPage(const v1::ListTrialsRequest& request);
  absl::StatusOr<std::vector<v1::StrategyAnswer>> QueryStrategies(
      const v1::QueryStrategiesRequest& request);

  absl::StatusOr<v1::RegisterResponse> RegisterWorker(const v1::RegisterRequest& request);
  absl::Status Heartbeat(const std::string& worker_id);
  std::vector<v1::Worker> ListWorkers();

  // One scheduling round; the scheduler thread calls it every tick.
  void Tick();

 private:
  struct Rank {
    std::string worker_id;
    std::string address;
    int device_index = 0;  // position in the worker's device list
    int local_rank = 0;    // index among the trial's ranks on this worker
    bool finished = false;
    std::optional<TrialMetrics> metrics;  // once the rank SUCCEEDED
  };
  // One trial and its current attempt (record.attempt): a trial whose
  // attempt fails for infrastructure reasons is started again on fresh ranks
  // with the next attempt number.
  struct TrialRun {
    TrialRecord record;
    Strategy strategy;
    int measured_steps = 0;   // the proposal's (0: the job's)
    std::vector<Rank> ranks;  // by rank; a worker's ranks are adjacent
    int ranks_pending = 0;
    int master_port = 0;  // rendezvous port on rank 0's host; 0 for one rank
    // The attempt's first infrastructure failure (reason names the rank):
    // the other ranks are cancelled, and once all have answered the trial is
    // retried, unless one of them failed by the strategy meanwhile.
    std::optional<RankOutcome> infrastructure_failure;
    uint64_t version = 0;  // the job's version when the trial last changed
  };
  struct JobRun {
    JobRecord record;
    v1::TuneRequest request;  // without the torchscript file
    ModelSpec model;
    std::shared_ptr<const std::string> script;  // torchscript file, when there is one
    // The candidates and how to search them; the searcher is created once the
    // pool can run the job's trials (its cost model needs the devices).
    std::vector<Strategy> space;
    SearchAlgorithm algorithm = SearchAlgorithm::kAuto;
    std::optional<PartialStrategy> load;
    std::unique_ptr<Searcher> searcher;
    std::vector<std::unique_ptr<TrialRun>> trials;
    // Trials waiting for a new attempt, oldest first; dispatched before any
    // new proposal.
    std::deque<TrialRun*> retries;
    // Once the search is over: why ("trial budget spent", ...), and the
    // confirmation trials not yet dispatched, in order.
    std::string search_ended;
    std::deque<TrialRun*> confirmations;
    int running = 0;  // trials whose current attempt was dispatched
    // The first failed write of the job or a trial to the store: the job ends
    // FAILED on the next tick (its results could not be kept).
    absl::Status store_error;
    uint64_t version = 0;
  };
  struct WorkerState {
    v1::Worker info;
    std::vector<std::string> held_by;  // trial id per device, "" when free
    absl::Time last_seen;
    bool healthy = true;
  };
  // A RunTrial sent and not yet answered: what it holds until it answers,
  // whether or not its trial (or job) still runs.
  struct RankHold {
    std::string worker_id;
    int device_index = 0;
    int port = 0;      // rank 0 of a multi-rank trial: its rendezvous port
    std::string host;  // ... on this host
  };
  // (trial id, attempt, rank)
  using RankKey = std::tuple<std::string, int, int>;
  struct Dispatch {
    std::string address;
    v1::RunTrialRequest request;
    absl::Duration rpc_timeout;
    std::string job_id;
    std::string trial_id;
    int attempt = 1;
    int rank = 0;
  };
  struct Cancel {
    std::string address;
    v1::CancelTrialRequest request;
  };

  JobManager(Store* store, TrialExecutor* executor, const Clock* clock, JobManagerOptions options);

  void Run();
  void TickLocked(std::vector<Dispatch>* dispatches, std::vector<Cancel>* cancels);
  // Starts one trial of the job (a retry first, else the searcher's next
  // proposal) on a free gang; false when there is no gang or no proposal.
  bool DispatchOneLocked(JobRun* job, std::vector<Dispatch>* dispatches);
  // Holds `ranks` (and `port` on rank 0's host) for the trial's current
  // attempt, marks it RUNNING and queues one RunTrial per rank.
  void StartAttemptLocked(JobRun* job, TrialRun* trial, std::vector<Rank> ranks, int port,
                          std::vector<Dispatch>* dispatches);
  // Once every rank of an attempt that failed for infrastructure reasons has
  // answered: queues the trial for its next attempt, or gives it up (FAILED,
  // infrastructure) after options_.max_attempts or past the deadline.
  void RetryOrGiveUpLocked(JobRun* job, TrialRun* trial, std::vector<Cancel>* cancels);
  // Applies one rank's answer to its trial's current attempt (the rank is
  // already marked finished): a strategy outcome ends the trial at once; an
  // infrastructure failure cancels the other ranks; the last answer ends the
  // trial SUCCEEDED or, after an infrastructure failure, retries it.
  void OnRankOutcomeLocked(JobRun* job, TrialRun* trial, int rank_index, RankOutcome outcome,
                           const TrialMetrics& metrics, std::vector<Cancel>* cancels);
  // One CancelTrial per worker that still runs a rank of the trial's attempt.
  static void CancelRanksLocked(const TrialRun& trial, std::vector<Cancel>* cancels);
  // Creates the job's searcher for the devices of the pool (`pool` of them
  // healthy) and records what it prunes straight away. INVALID_ARGUMENT when
  // the request cannot be searched after all.
  absl::Status CreateSearcherLocked(JobRun* job, int pool);
  // True when the time left is only enough for the confirmation trials (by
  // the median length of the job's trials so far) and the trials still
  // running: the search proposes nothing more.
  bool SearchTimeUpLocked(const JobRun& job) const;
  // Appends a trial of `strategy` to the job: the next index, its id,
  // attempt 1, the strategy's text and JSON; the caller sets the rest.
  TrialRun* NewTrialLocked(JobRun* job, const Strategy& strategy);
  // The job's answer so far (server/answer.h).
  Answer AnswerLocked(const JobRun& job) const;
  // Creates (PENDING) and queues the confirmation trials of the job's best
  // few strategies.
  void QueueConfirmationsLocked(JobRun* job);
  // Records the searcher's newly pruned candidates as PRUNED trials.
  void RecordPrunedLocked(JobRun* job);
  // What the coordinator knows of the job's devices: the smallest memory and
  // the first peak among the healthy workers' devices of `type`.
  DeviceSpec DeviceSpecLocked(const std::string& type) const;
  void FinishJobLocked(JobRun* job, JobState state, const std::string& message,
                       std::vector<Cancel>* cancels);
  void EndTrialLocked(JobRun* job, TrialRun* trial, TrialStatus status, const std::string& reason,
                      const TrialMetrics& metrics, std::vector<Cancel>* cancels);
  // Frees the device (and rank 0's rendezvous port) that rank `rank` of
  // attempt `attempt` of `trial_id` holds. Idempotent.
  void ReleaseRankLocked(const std::string& trial_id, int attempt, int rank);
  // The trial's metrics from its ranks' (every rank SUCCEEDED).
  static TrialMetrics GangMetrics(const TrialRun& trial);
  void OnRankDone(const std::string& job_id, const std::string& trial_id, int attempt, int rank,
                  absl::Status status, v1::RunTrialResponse response);
  void SendAll(std::vector<Dispatch> dispatches, std::vector<Cancel> cancels);
  void PersistJobLocked(JobRun* job);
  void PersistTrialLocked(JobRun* job, TrialRun* trial);
  // `count` free devices of `type` on healthy workers, packed onto as few
  // workers as possible, a worker's ranks adjacent and local_rank set; empty
  // unless all `count` are free (all or nothing). count > 1: rank 0's host
  // must also have a free rendezvous port, returned in `*port` (else empty).
  std::vector<Rank> FindFreeDevicesLocked(const std::string& type, int count, int* port);
  // Lowest port of the worker's rendezvous range that no running trial holds
  // on the worker's host (workers sharing a host share its ports) and that
  // is not quarantined; 0 when none is free.
  int FreePortLocked(const WorkerState& w) const;
  // Devices of `type` on healthy workers, free or not.
  int CountDevicesLocked(const std::string& type) const;
  // What the healthy workers on one host offer together, against what the
  // host has (as the workers reported it; 0 = unknown).
  struct HostShare {
    int cores = 0;
    int64_t memory_bytes = 0;
    int cpu_slots = 0;
    int64_t cpu_memory_bytes = 0;
  };
  HostShare HostShareLocked(const std::string& host) const;
  // A device's memory as the search counts it: a cpu device whose host's
  // workers claim more memory than the host has gets its share.
  int64_t EffectiveMemoryLocked(const WorkerState& w, const v1::Device& d) const;
  // Why the workers on `w`'s host oversubscribe it ("" none).
  std::vector<std::string> HostWarningsLocked(const WorkerState& w) const;
  v1::Job JobToProtoLocked(const JobRun& job) const;
  std::string NewJobIdLocked();

  Store* const store_;
  TrialExecutor* const executor_;
  const Clock* const clock_;
  const JobManagerOptions options_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::unique_ptr<JobRun>> active_;  // by job id
  std::vector<std::string> active_order_;                  // FIFO of job ids
  std::map<std::string, WorkerState> workers_;
  std::map<RankKey, RankHold> holds_;
  // Finished jobs whose final write to the store failed: answered from here
  // (so what clients saw never goes back) and written again every tick.
  struct UnstoredJob {
    JobRecord record;
    std::vector<TrialRecord> trials;
  };
  std::map<std::string, UnstoredJob> unstored_;
  RendezvousPorts ports_;
  uint64_t job_counter_ = 0;
  int rpcs_in_flight_ = 0;  // RunTrial calls whose answer has not come back
  std::thread thread_;
};

// Rendezvous ports of a worker that registers without a range.
inline constexpr int kDefaultRendezvousPortMin = 29500;
inline constexpr int kDefaultRendezvousPortMax = 29999;

// The host part of a worker address: "host:port" -> "host", "[::1]:port" ->
// "::1"; an address without a port is returned as it is.
std::string HostOfAddress(const std::string& address);

// Infrastructure failures of a job's trials: failed attempts (retried or
// given up), trials given up after every retry, and up to five distinct
// reasons ("attempt N: " left off), in the order met.
struct InfrastructureSummary {
  int failures = 0;
  int trials_lost = 0;
  std::vector<std::string> reasons;
};
InfrastructureSummary SummariseInfrastructure(const std::vector<TrialRecord>& trials);

// Converters shared with tests.
v1::Trial TrialToProto(const TrialRecord& record);
v1::Job JobRecordToProto(const JobRecord& record, const std::vector<TrialRecord>& trials);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_MANAGER_H_
