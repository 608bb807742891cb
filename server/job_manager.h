// The coordinator's jobs: the scheduler tick and each job's and trial's
// state machine.
//
// A job is submitted (validated into a JobSpec, server/tune_request.h),
// waits until the worker pool (server/worker_pool.h) has devices enough for
// one trial, gets a searcher, and then, every tick, the searcher's
// proposals run as trials on gangs the pool places, each rank through the
// TrialExecutor (server/trial_executor.h). A trial attempt that fails for
// infrastructure reasons runs again; when the search is over the best few
// strategies are measured again (server/answer.h), and the job ends with an
// outcome (server/job_outcome.h) that may update the strategy database.
// Clients see jobs and trials through server/job_view.h.
//
// The class's methods are in four files by concern: job_manager.cc (the
// scheduler: ticks, jobs advanced, trials placed and started, searches
// installed, the stop sequence), job_manager_answers.cc (what ranks' answers
// do, up to a trial's and a job's end), job_manager_workers.cc (the pool's
// side, re-attach after a restart) and job_manager_reads.cc (what clients
// read). They share one lock and one state; what needs neither is in its
// collaborators: admission (job_admission.h), the per-user bound
// (user_job_bound.h), the writer (job_writer.h), trial transitions
// (job_run.h), re-attach matching (reattach.h), messages (job_messages.h).
//
// Store: every change to a job or trial is kept, with the lock held, for
// the job manager's writer (server/job_writer.h), which writes what one hold
// of the lock changed in one transaction after the lock is let go and
// before any RunTrial or cancel of that hold is sent, in the order of the
// holds; readers see running jobs from memory meanwhile. A newly planned
// search (its algorithm and candidate count) is written with the job's next
// record. A write that fails is not retried behind the client's back: the
// job ends FAILED at the next tick, its message naming the store error; a
// finished job whose final write failed is kept in memory, answered from
// there and written again until it is stored (server/job_archive.h). A job
// that cannot be created in the store is refused with the store's error
// (written before the job is active, without the lock).
//
// Threads: RPC handlers call the public methods from any thread; one
// scheduler thread (or a test calling Tick()) advances jobs. One mutex
// guards all job state; calls to the executor and writes to the store are
// made without it (SubmitJob's and the writer's). A rank's
// answer never waits for that mutex (gRPC runs answers on the same few
// threads as heartbeats): it is applied at once when the mutex is free, and
// otherwise left in the scheduler's inbox (server/scheduler_inbox.h) for
// the mutex's holder or the next tick; the rank's device is free once its
// answer is applied. The scheduler applies answers in batches, letting the
// mutex go between them.
#ifndef AUTOACCEL_SERVER_JOB_MANAGER_H_
#define AUTOACCEL_SERVER_JOB_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/autoaccel.pb.h"
#include "server/coordinator_metrics.h"
#include "server/job_admission.h"
#include "server/job_archive.h"
#include "server/job_run.h"
#include "server/job_writer.h"
#include "server/model_file_delivery.h"
#include "server/model_file_store.h"
#include "server/scheduler_inbox.h"
#include "server/search_planner.h"
#include "server/store/store.h"
#include "server/trial_executor.h"
#include "server/tune_request.h"
#include "server/user_job_bound.h"
#include "server/worker_pool.h"

namespace autoaccel {

struct JobManagerOptions {
  absl::Duration heartbeat_interval = absl::Seconds(2);
  // A worker silent for this long is declared lost; its running ranks fail.
  absl::Duration worker_timeout = absl::Seconds(10);
  // What a request that leaves warm-up, measured steps, their minimum time
  // or the trial timeout at 0 gets.
  TuneDefaults tune_defaults;
  // A rank may run this long past its job's deadline before its RunTrial
  // times out (the job is ended at its deadline anyway; the slack lets the
  // worker's own answer, not the RPC deadline, say how the rank ended).
  absl::Duration deadline_slack = absl::Seconds(5);
  // Extra time the RPC is allowed beyond the trial's own timeout.
  absl::Duration rpc_grace = absl::Seconds(15);
  absl::Duration tick_interval = absl::Milliseconds(100);
  // Attempts a trial gets when it keeps failing for infrastructure reasons
  // (rendezvous, worker lost, ...); after the last it is given up and the
  // job's answer rests on partial evidence.
  int max_attempts = 3;
  // A worker whose ranks failed this many times in a row for reasons
  // outside their strategy gets no new trials for `quarantine_for`.
  int quarantine_after = 5;
  absl::Duration quarantine_for = absl::Minutes(5);
  // After a restart: how long the trials the earlier process was running
  // wait for their workers to register again reporting them (workers keep
  // such ranks running, autoaccel-worker --reattach-window) before they run
  // again as a new attempt; 0 runs them again at the first tick.
  absl::Duration reattach_window = absl::Seconds(30);
  // A lost worker that holds no device is forgotten after this long silent
  // (it registers again if it comes back).
  absl::Duration forget_lost_workers_after = absl::Minutes(10);
  // How long a rendezvous port a trial failed on stays out of use.
  absl::Duration port_quarantine = absl::Minutes(10);
  // Before a job ends, its best this many strategies are measured again
  // (server/answer.h); the search stops at this share of the time limit
  // before the deadline to leave them room.
  int confirm_top = 3;
  double confirm_reserve = 0.15;
  // A worker whose figures cannot be true (server/measurement_check.h), or
  // that disagrees with a peer beyond reason, gets no trials for this long.
  absl::Duration distrust_for = absl::Hours(24);
  // Where torchscript jobs' model files are kept while the jobs are
  // unfinished (server/model_file_store.h; server/main.cc: beside the
  // database), and the caps on their bytes. Empty: a private temporary
  // directory (lost with the process).
  std::string model_file_dir;
  ModelFileLimits model_file_limits;
};

class JobManager {
 public:
  // `store`, `executor` and `clock` must outlive the manager. Jobs left
  // unfinished by an earlier server process on the store go on
  // (server/job_resume.h): their time limits keep counting from submission,
  // the trials it was running run again as new attempts, and their searches
  // take up the recorded trials once workers are back; a job that cannot go
  // on is closed FAILED saying why. A store error doing so is returned.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(Store* store, TrialExecutor* executor,
                                                            const Clock* clock,
                                                            JobManagerOptions options);
  ~JobManager();

  // Starts / stops the scheduler thread. Stop() cancels nothing.
  void Start();
  void Stop();
  // The server is shutting down: no trial starts from now on, and every
  // running job stays unfinished in the store (its status says so), for the
  // next server on the store to resume. Trials running now go on; their
  // answers are recorded as they come (Drain).
  void Shutdown();
  // Waits until every RunTrial sent to a worker has answered, up to
  // `timeout`; returns false if some are still out. Call after Shutdown(),
  // and again before destroying the executor.
  bool Drain(absl::Duration timeout);
  // After Shutdown() and a Drain() that timed out: every trial still running
  // is cut (its workers told to stop it) and recorded as an attempt cut by
  // the shutdown, waiting for its next attempt (or given up after the last).
  // Returns how many were cut.
  int CutRunning();

  // Validates and stores a job. INVALID_ARGUMENT naming the field for bad
  // input; nothing is stored then. The store's error if it cannot be stored.
  // Unless the request says `force`, the strategy database's answer for its
  // signature may answer it (server/database_answer.h): the job is then
  // stored and returned SUCCEEDED, with `answered_from` set, and runs
  // nothing; otherwise its status says why the stored answer did not.
  // The job belongs to `owner` (server/auth.h; "" when users are not
  // authenticated); RESOURCE_EXHAUSTED when that user already has
  // Limit::kJobsPerUser unfinished jobs (server/request_limits.h), or when
  // a torchscript job's file would pass a cap on the model files held
  // (JobManagerOptions::model_file_limits); INTERNAL when the file cannot be
  // written to disk.
  absl::StatusOr<v1::Job> SubmitJob(v1::TuneRequest request, const std::string& owner = "");
  // Who submitted the job, without rendering it. NOT_FOUND for an unknown job.
  absl::StatusOr<std::string> JobOwner(const std::string& job_id);
  // NOT_FOUND for an unknown job; DATA_LOSS for one whose stored records do
  // not parse (server/job_view.h).
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  // The job and its trials changed since `since_version` (0: all of them;
  // PRUNED ones only with `include_pruned`), and in `*version` a counter that
  // grows whenever the job or a trial changes (UINT64_MAX once the job has
  // finished; then every trial run is included again, as what changed since
  // `since_version` is no longer known). When nothing changed since
  // `since_version` the event is empty (no job, no trials) and costs no
  // rendering. NOT_FOUND for an unknown job.
  absl::StatusOr<v1::JobEvent> GetJobEvent(const std::string& job_id, uint64_t since_version,
                                           bool include_pruned, uint64_t* version);
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id);
  // Newest first; `limit` 0 means 50, at most 500 are listed; with `owner`,
  // only that user's jobs. The jobs' requests come without their config text.
  absl::StatusOr<std::vector<v1::Job>> ListJobs(int limit,
                                                const std::optional<std::string>& owner = {});
  // Every trial of the job, pruned ones included (for tests and tools in
  // this process; RPCs page with ListTrialsPage).
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(const std::string& job_id);
  // One page of the job's trials in proposal order. INVALID_ARGUMENT for a
  // page size outside 0..5000 or a token this server did not give;
  // NOT_FOUND for an unknown job.
  absl::StatusOr<v1::ListTrialsResponse> ListTrialsPage(const v1::ListTrialsRequest& request);

  // The worker pool's RPCs (server/worker_pool.h); a registration or a
  // worker coming back wakes the scheduler. The response carries the
  // registration's session token. The ranks a registration reports running
  // (RegisterRequest.running_ranks) are taken up when their trial awaits
  // them after a restart (once every rank of it is reported, the
  // coordinator attaches to them: RunTrialRequest.attach_only), left alone
  // when this process runs them, and cancelled otherwise; a trial awaiting
  // a rank on this worker that it did not report runs again as its next
  // attempt.
  absl::StatusOr<v1::RegisterResponse> RegisterWorker(const v1::RegisterRequest& request);
  // `timing_jitter` > 0: the worker's new measurement (WorkerPool::Heartbeat).
  absl::Status Heartbeat(const std::string& worker_id, const std::string& session_token,
                         double timing_jitter = 0);
  // A worker stopping cleanly leaves the pool (WorkerPool::Leave); errors
  // as Heartbeat's.
  absl::Status LeaveWorker(const std::string& worker_id, const std::string& session_token);
  std::vector<v1::Worker> ListWorkers();
  // A page of the pool (v1::ListWorkersRequest: at most `limit` workers,
  // 0: 100, at most 1000, and at most 2 MiB of them) with the whole pool's
  // counts. INVALID_ARGUMENT for a negative limit.
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest& request);
  // How to reach a registered worker (WorkerPool::Endpoint); NOT_FOUND when
  // it is not in the pool.
  absl::StatusOr<WorkerEndpoint> WorkerEndpointOf(const std::string& worker_id);

  // The metrics (server/coordinator_metrics.h) with the scheduler's and the
  // pool's state now, in Prometheus's text format. The manager times every
  // write of its store (Store::SetWriteTimer) from Create until it is
  // destroyed.
  std::string MetricsText();
  // The scheduler's state now, as the metrics count it.
  SchedulerCensus Census();

  // One scheduling round; the scheduler thread calls it every tick.
  void Tick();

 private:
  // Answers applied, and trials dispatched, per hold of the lock by the
  // scheduler (and answers by a callback): RPC handlers waiting for the lock
  // get it between batches.
  static constexpr size_t kAnswersPerHold = 256;
  static constexpr int kDispatchesPerHold = 256;

  // A RunTrial to send once the mutex is released.
  struct Dispatch {
    WorkerEndpoint to;
    v1::RunTrialRequest request;
    absl::Duration rpc_timeout;
    std::string job_id;
    std::string trial_id;
    int attempt = 1;
    int rank = 0;
    std::optional<ModelFileRef> model_file;  // torchscript jobs: sent when the worker lacks it
  };
  struct Cancel {
    WorkerEndpoint to;
    v1::CancelTrialRequest request;
  };
  // What a tick or an answer decided to write and to send, and the searches
  // to plan (server/search_planner.h), all once the mutex is released.
  struct Outbox {
    // The hold's writes (set by Hold), written before anything is sent.
    JobWriter::Batch writes;
    std::vector<Dispatch> dispatches;
    std::vector<Cancel> cancels;
    std::vector<SearchPlan> plans;
    // Workers just distrusted: the stored answers they alone measured are
    // withdrawn (Store::WithdrawAnswersMeasuredOnlyOn).
    std::vector<std::string> distrusted;
  };
  // The lock, held for one piece of work that may change jobs: as it is
  // let go, the writes kept meanwhile go into `out` (SendAll writes them
  // before it sends anything).
  class ABSL_SCOPED_LOCKABLE Hold {
   public:
    Hold(JobManager* manager, Outbox* out) ABSL_EXCLUSIVE_LOCK_FUNCTION(manager->mu_);
    ~Hold() ABSL_UNLOCK_FUNCTION();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    JobManager* const manager_;
    Outbox* const out_;
  };

  JobManager(Store* store, TrialExecutor* executor, const Clock* clock, JobManagerOptions options);
  // Takes up the jobs an earlier server left unfinished (see Create).
  absl::Status ResumeUnfinished() ABSL_LOCKS_EXCLUDED(mu_);
  // Every running job's status: the coordinator shut down, it goes on later.
  void SayStoppedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void Run();
  void SendAll(Outbox outbox);
  // One scheduling round, dispatching at most `max_dispatches` trials; true
  // when it stopped there with trials left to place.
  bool TickLocked(int max_dispatches, Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ranks of running trials on workers just declared lost fail as
  // infrastructure failures.
  void FailRanksOfLostWorkersLocked(Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the job, queues its confirmations, or waits for workers; true when
  // it may dispatch trials this tick.
  bool AdvanceJobLocked(JobRun* job, Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts one trial of the job (a retry first, then a confirmation, else
  // the searcher's next proposal) on a free gang; false when there is no
  // gang or nothing to run.
  bool DispatchOneLocked(JobRun* job, Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang of `ranks` devices for one attempt of `job`'s trial from the
  // pool (nullopt: none fits now), remembering within a tick which shapes
  // found no room.
  std::optional<Gang> PlaceLocked(const JobRun& job, const std::string& trial_id, int attempt,
                                  int ranks, const std::set<std::string>& avoid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the trial's current attempt RUNNING on `gang` and queues one
  // RunTrial per rank.
  void StartAttemptLocked(JobRun* job, TrialRun* trial, Gang gang, Outbox* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once every rank of an attempt that failed for infrastructure reasons has
  // answered: queues the trial for its next attempt, or gives it up (FAILED,
  // infrastructure) after options_.max_attempts or past the deadline.
  void RetryOrGiveUpLocked(JobRun* job, TrialRun* trial, Outbox* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one rank's answer to its trial's current attempt (the rank is
  // already marked finished) and acts on the verdict (job_run.h).
  void OnRankOutcomeLocked(JobRun* job, TrialRun* trial, int rank_index, RankOutcome outcome,
                           const TrialMetrics& metrics, Outbox* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One CancelTrial per worker that still runs a rank of the trial's attempt.
  static void CancelRanks(const TrialRun& trial, Outbox* out);
  // One RunTrial per rank of the trial's current attempt (placed), with
  // the time left to the job's deadline; `attach_only` for ranks taken up
  // after a restart.
  void QueueRankCallsLocked(const JobRun& job, const TrialRun& trial, bool attach_only,
                            Outbox* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The ranks a registering worker reports (see RegisterWorker).
  void TakeUpRanksLocked(const v1::RegisterRequest& request, const std::string& session_token,
                         Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank of the trial awaiting re-attachment is held: one attach-only
  // RunTrial per rank.
  void ReattachLocked(JobRun* job, TrialRun* trial, Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The trial awaiting re-attachment runs again as its next attempt (or is
  // given up): the ranks held so far are released and cancelled.
  void GiveUpReattachLocked(JobRun* job, TrialRun* trial, const std::string& why, Outbox* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases what a trial awaiting re-attachment holds; it awaits no more.
  void StopAwaitingLocked(TrialRun* trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives a planned search to its job, if the job still runs, and records
  // what it prunes straight away; a request that cannot be searched after all
  // ends the job FAILED. Wakes the scheduler.
  void InstallSearch(PlannedSearch planned) ABSL_LOCKS_EXCLUDED(mu_);
  void InstallSearchLocked(JobRun* job, const PlannedSearch& planned)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SearchTimeUpLocked(const JobRun& job) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The pool's devices of the job's type (and launcher), free or not.
  int PoolDevicesLocked(const JobRun& job) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Creates (PENDING) and queues the confirmation trials of the job's best
  // few strategies.
  void QueueConfirmationsLocked(JobRun* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once the confirmations are done: when the answer is not settled
  // (server/settle.h) and the time left holds another round, queues repeats
  // of the strategies whose measurements may decide, and says so in the
  // job's status; false when the job is to end instead.
  bool QueueRepeatsLocked(JobRun* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A proxy job whose repeats are done: queues one measurement of its
  // answer at full size (AddFullSizeCheck) when the pool holds the job's
  // world size and it has none yet; false when nothing was queued.
  bool QueueFullSizeCheckLocked(JobRun* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the searcher's newly pruned candidates as PRUNED trials.
  void RecordPrunedLocked(JobRun* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishJobLocked(JobRun* job, JobState state, const std::string& message, Outbox* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndTrialLocked(JobRun* job, TrialRun* trial, TrialStatus status, const std::string& reason,
                      const TrialMetrics& metrics, Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank's answer, from the executor's thread: see "Threads" above.
  void OnRankDone(const std::string& job_id, const std::string& trial_id, int attempt, int rank,
                  absl::Status status, v1::RunTrialResponse response) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies up to `max` answers waiting in the inbox, oldest first.
  void ApplyAnswersLocked(size_t max, Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyAnswerLocked(RankAnswer answer, Outbox* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keep the job / trial for the writer and bump the job's version.
  void PersistJobLocked(JobRun* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistTrialLocked(JobRun* job, TrialRun* trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The writer's failures since the last look go to their jobs' store_error
  // (each such job ends FAILED when the scheduler advances it).
  void TakeWriteFailuresLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A running job's records as they are now, copied under the lock, so
  // that rendering it (settling its measurements, every trial's message)
  // does not hold the lock: readers of a long job would otherwise stall the
  // scheduler (bench/scale.py).
  struct JobSnapshot {
    JobRecord record;
    std::vector<TrialRecord> trials;
    v1::TuneRequest request;
  };
  JobSnapshot SnapshotLocked(const JobRun& job) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::Job> Render(const JobSnapshot& job) const;

  Store* const store_;
  TrialExecutor* const executor_;
  const Clock* const clock_;
  const JobManagerOptions options_;
  // Thread-safe on their own; called with mu_ held or not (lock order: mu_
  // first).
  WorkerPool pool_;
  JobArchive archive_;  // finished jobs
  CoordinatorMetrics metrics_;
  EarlierTrialsCache earlier_trials_;            // the warm start's reads, shared by submissions
  std::unique_ptr<ModelFileStore> model_files_;  // set by Create
  std::unique_ptr<ModelFileDelivery> model_delivery_;
  std::unique_ptr<JobAdmission> admission_;  // set by Create: SubmitJob's work before the lock
  UserJobBound user_jobs_;                   // the per-user bound on unfinished jobs

  // Answers not applied yet, and the scheduler's wake-ups (a job, a worker,
  // an answer or a stop).
  SchedulerInbox inbox_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown(): no new trials
  // By job id; shared with the search planner while it plans the job.
  std::map<std::string, std::shared_ptr<JobRun>> active_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> active_order_ ABSL_GUARDED_BY(mu_);  // FIFO of job ids
  // RunTrial calls whose answer has not come back.
  int rpcs_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Trials awaiting their workers after a restart (TrialRun.awaiting_reattach):
  // while none does, ticks and registrations do not look for them.
  int awaiting_reattach_ ABSL_GUARDED_BY(mu_) = 0;
  // What one TickLocked computes once rather than at each of its
  // dispatches (each job's search-time check walks its trials; the pool's
  // device count walks the pool): nothing they read changes while it runs
  // but the devices' holds. Active only during TickLocked.
  struct TickMemo {
    bool active = false;
    std::map<std::pair<std::string, std::string>, int> devices;  // (type, launcher)
    std::map<const JobRun*, bool> search_time_up;
    // Gangs the pool had no room for (placed avoiding no worker): every
    // other job of that shape is skipped until a device is released.
    struct GangShape {
      std::string type, launcher;
      int world = 0;
      bool operator<(const GangShape& o) const {
        return std::tie(type, launcher, world) < std::tie(o.type, o.launcher, o.world);
      }
    };
    std::set<GangShape> unplaceable;
  };
  mutable TickMemo tick_memo_ ABSL_GUARDED_BY(mu_);
  // Writes to the store what each hold of mu_ changed, once it is let go.
  JobWriter writer_{store_, &archive_};
  // The scheduler thread: started and joined by Start() / Stop(), which
  // never hold mu_ while joining.
  absl::Mutex thread_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::thread thread_ ABSL_GUARDED_BY(thread_mu_);
  // Its own thread once started; delivers to InstallSearch. Last member: it
  // is stopped (and destroyed) before the state it installs into.
  SearchPlanner planner_{[this](PlannedSearch planned) { InstallSearch(std::move(planned)); }};
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_MANAGER_H_
