// The in-memory state of one running job: its spec, record, searcher and
// trials, each trial with the ranks of its current attempt; and the rules
// that only read or update that state (how a trial attempt's rank answers
// merge into the trial's outcome, when the search must stop to leave time
// for the confirmations, the answer so far).
//
// Plain data and pure functions: JobManager owns every JobRun and touches it
// only with its mutex held; nothing here locks, stores or sends.
#ifndef AUTOACCEL_SERVER_JOB_RUN_H_
#define AUTOACCEL_SERVER_JOB_RUN_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "search/searcher.h"
#include "server/answer.h"
#include "server/answer_so_far.h"
#include "server/measurement_check.h"
#include "server/rank_outcome.h"
#include "server/store/records.h"
#include "server/tune_request.h"
#include "server/warm_start.h"
#include "server/worker_pool.h"

namespace autoaccel {

// One rank of a trial's current attempt.
struct Rank {
  PlacedRank placed;
  bool finished = false;
  std::optional<TrialMetrics> metrics;  // once the rank SUCCEEDED
};

// One trial and its current attempt (record.attempt): a trial whose attempt
// fails for infrastructure reasons is started again on fresh ranks with the
// next attempt number.
struct TrialRun {
  TrialRecord record;
  Strategy strategy;
  std::vector<Rank> ranks;  // by rank; a worker's ranks are adjacent
  int ranks_pending = 0;
  std::string master_host;  // rank 0's host, where the rendezvous port is held
  int master_port = 0;      // 0 for one rank
  // The attempt's first infrastructure failure (reason names the rank):
  // the other ranks are cancelled, and once all have answered the trial is
  // retried, unless one of them failed by the strategy meanwhile.
  std::optional<RankOutcome> infrastructure_failure;
  uint64_t version = 0;  // the job's version when the trial last changed
  // A trial the coordinator was running when it restarted
  // (server/job_resume.h): RUNNING, its ranks named by worker but not placed
  // until their workers register again reporting them, and given up (run
  // again as its next attempt) after `reattach_until`.
  bool awaiting_reattach = false;
  absl::Time reattach_until = absl::InfinitePast();
  int ranks_attached = 0;
  // Its end was reported to the job's searcher (or the searcher took it up
  // as ended): a searcher created after it ended is told once.
  bool told_searcher = false;
  // Since when it waits for a gang (a retry or confirmation queued; for the
  // dispatch-wait metric); InfinitePast for a new proposal.
  absl::Time ready_since = absl::InfinitePast();
};

struct JobRun {
  JobSpec spec;  // space and load are moved to the searcher once it exists
  JobRecord record;
  // Created once the pool can run the job's trials (its cost model needs the
  // devices).
  std::unique_ptr<Searcher> searcher;
  // Earlier jobs' measured trials on the job's device type, read at
  // submission (server/warm_start.h); fed to the cost model when the
  // searcher is created (PrepareSearch), then dropped.
  std::shared_ptr<const EarlierTrials> earlier;   // null: starts cold
  std::vector<std::unique_ptr<TrialRun>> trials;  // in proposal order
  // Trials waiting for a new attempt, oldest first; dispatched before any
  // new proposal.
  std::deque<TrialRun*> retries;
  // Once the search is over: why ("trial budget spent", ...), and the
  // confirmation trials not yet dispatched, in order.
  std::string search_ended;
  std::deque<TrialRun*> confirmations;
  // SameFailureEveryTime's reason once a failed trial made it so (checked
  // when a search trial FAILED, not every tick); the job then ends.
  std::string broken;
  int running = 0;  // trials whose current attempt was dispatched
  // The first failed write of the job or a trial to the store: the job ends
  // FAILED on the next tick (its results could not be kept).
  absl::Status store_error;
  uint64_t version = 0;  // grows whenever the job or one of its trials changes
  // Its search is being planned (server/search_planner.h) off the lock.
  bool planning = false;
  // Which results can change its answer so far (UpdateAnswerSoFar).
  AnswerSoFarShortcut answer_shortcut;
};

// What a trial runs: the job's model, global batch and the trial's strategy,
// or in a proxy job (JobSpec.proxy) the strategy's proxy trial, but for a
// full-size check (TrialRecord.full_size). (The space of a proxy job holds
// only strategies it can run.) `ranks` is how many ranks run it.
struct TrialWork {
  ModelSpec model;
  int global_batch_size = 0;
  Strategy strategy;
  int ranks = 1;
};
TrialWork WorkOf(const JobSpec& spec, const TrialRun& trial);

// The id the job's next trial gets: "<job id>-t0007" for index 7.
std::string NextTrialId(const JobRun& job);
// Appends a trial of `strategy` to the job: the next index, its id
// (NextTrialId), attempt 1, the strategy's text and JSON; the caller
// sets the rest.
TrialRun* NewTrial(JobRun* job, const Strategy& strategy);
// Appends the searcher's pruned candidates as PRUNED trials (attempt 0,
// never run) at `now`, all at the job's next version, and returns their
// records.
std::vector<TrialRecord> AddPrunedTrials(JobRun* job, std::vector<PrunedStrategy> pruned,
                                         absl::Time now);
// Appends (PENDING) and queues the confirmation trials of the job's best
// `count` strategies (server/answer.h TrialsToConfirm) and returns them.
std::vector<TrialRun*> AddConfirmations(JobRun* job, int count);
// A proxy job's full-size check: appends (PENDING) and queues a trial of
// its answer's strategy (server/answer.h ChooseAnswer) measured at full
// size (full_size, confirms the answering proxy trial) and returns it;
// null when the job has no answer or has a full-size check already.
TrialRun* AddFullSizeCheck(JobRun* job);
// Appends (PENDING) and queues one more repeat of each of `strategies`
// (texts; each confirms the strategy's first trial), except a strategy that
// has no first trial or has had kMaxMeasurements trials already (whatever
// their end: a repeat that keeps failing is not run forever), and returns
// them.
std::vector<TrialRun*> AddRepeats(JobRun* job, const std::vector<std::string>& strategies);
// A job whose first kTrialsToCallItBroken ended trials (search trials, not
// lost to infrastructure, none SUCCEEDED or OOM) all FAILED before their
// first measured step, for one reason (search/failure_memory.h ReasonKey):
// the script or the model is broken, whatever the strategy, and waiting for
// the time limit would only fail more trials the same way.
inline constexpr int kTrialsToCallItBroken = 3;
// That reason when `job` is such a job; "" otherwise.
std::string SameFailureEveryTime(const JobRun& job);
// The trial with this id, or null.
TrialRun* FindTrial(const JobRun& job, const std::string& trial_id);
// Every trial's record, in proposal order.
std::vector<TrialRecord> TrialRecords(const JobRun& job);
// The ended trial as its searcher hears of it: a trial lost to
// infrastructure failures measured nothing and counts as cancelled.
ScoredTrial ScoredOf(const TrialRun& trial);
// `ended` just ended SUCCEEDED: the job's record names its answer so far,
// from its SUCCEEDED trials (server/answer.h), recomputed only when `ended`
// may change it (server/answer_so_far.h).
void UpdateAnswerSoFar(JobRun* job, const TrialRecord& ended);
// Why the search is over, once it is: "trial budget spent", "every
// candidate measured or pruned", "search finished" or "search stopped to
// leave time for the repeats".
std::string WhySearchEnded(const JobRun& job);
inline constexpr char kSearchStoppedForRepeats[] = "search stopped to leave time for the repeats";
// How long a trial of the job takes now, start to answer (seconds): the
// lower median of its last 3 SUCCEEDED trials, search or repeat (the first
// trials may pay for compiling or caching what later ones reuse); 0 before
// any succeeded.
double RecentTrialSeconds(const JobRun& job);
// True when the time left before the deadline (at `now`) is only enough for
// `confirm_top` confirmation trials on `gangs` gangs at once (by
// RecentTrialSeconds) and the trials still running.
bool SearchTimeUp(const JobRun& job, absl::Time now, int gangs, int confirm_top);
// True when a round of `count` repeats on `gangs` gangs at once (by
// RecentTrialSeconds, a quarter more for safety) ends before the deadline.
bool RepeatRoundFits(const JobRun& job, absl::Time now, int gangs, int count);

// Trial transitions (they change the records only; the caller stores them):
//
// The trial's next attempt starts on `gang` at `now`: RUNNING, its ranks
// pending, the job's running count up.
void BeginAttempt(JobRun* job, TrialRun* trial, Gang gang, absl::Time now);
// Marks the ranks of the trial's current attempt on `worker_id` finished
// (they will never answer) and returns the first of them, -1 if none.
int MarkRanksLost(TrialRun* trial, const std::string& worker_id);
// After an attempt failed for infrastructure reasons (every rank answered):
// the reason is added to failed_attempts, and the trial waits (PENDING, in
// job->retries, ready since `now`) for its next attempt when it has had fewer than
// `max_attempts` and `now` is before the deadline; returns false when it is
// to be given up instead (then `infrastructure` is set).
bool QueueRetry(JobRun* job, TrialRun* trial, int max_attempts, absl::Time now);
// A proxy trial that just SUCCEEDED (its record's metrics what the proxy
// measured): its record keeps that measurement (record.proxy) and takes
// the full run's figures extrapolated from it by `model`, the job's
// calibrated cost model (search/proxy_extrapolation.h), as its metrics.
// Without a model (a resumed job's trial ending before its searcher was
// rebuilt) or when the extrapolation fails, the trial is FAILED with the
// reason instead: its measurement is not the full run's.
void ExtrapolateProxyTrial(const CostModel* model, TrialRun* trial);
// Once the search is over: every SUCCEEDED proxy trial's figures
// extrapolated again from its own measurement by `model`, calibrated now on
// all of the job's proxies (a trial reported early was extrapolated by a
// model that had seen few), and the answer so far recomputed. Returns the
// trials whose records changed (to be stored). Nothing without a model.
std::vector<TrialRun*> ReextrapolateProxyTrials(const CostModel* model, JobRun* job);
// The trial ends with `status` at `now`: out of the running count or the
// queues it waited in, its reason and metrics set.
void CloseTrial(JobRun* job, TrialRun* trial, TrialStatus status, const std::string& reason,
                const TrialMetrics& metrics, absl::Time now);
// The setup of the job's searcher for `device` (`pool` of them healthy): its
// candidates, budget (the search stops `confirm_reserve` of the time limit
// before the deadline, to leave the confirmations room) and steps; a loaded
// strategy's start (search/starting_point.h); its cost model warmed with the
// job's earlier_trials (setup->cost_model->earlier_observations() says how
// many it used). Returns how the job searches for people ("" when the
// searcher says it). INVALID_ARGUMENT as SetUpLoadedSearch's.
absl::StatusOr<std::string> PrepareSearch(const JobRun& job, const DeviceSpec& device, int pool,
                                          double confirm_reserve, const Clock* clock,
                                          SearchSetup* setup);

// What a trial attempt's ranks say so far, once another rank answered.
struct AttemptVerdict {
  enum Kind {
    kWait,   // ranks still to answer
    kEnd,    // the trial ends with `status`, `reason`, `metrics`
    kRetry,  // every rank answered after an infrastructure failure
  };
  Kind kind = kWait;
  TrialStatus status = TrialStatus::kFailed;
  std::string reason;
  TrialMetrics metrics;
  // An infrastructure failure was met first just now: the ranks still
  // running are to be cancelled.
  bool cancel_others = false;
  // The worker whose figures cannot be true (server/measurement_check.h):
  // to be distrusted; "" when none.
  std::string distrusted_worker;
};
// Applies rank `rank_index`'s answer (`outcome`, and `metrics` when it
// SUCCEEDED) to the trial's current attempt; the rank is already marked
// finished and counted off `ranks_pending`. A strategy outcome ends the
// trial at once; an infrastructure failure (or a cancelled rank) waits for
// the other ranks and then retries; the last answer of a gang that all
// SUCCEEDED ends it with the gang's metrics — FAILED, naming the worker to
// distrust, if one rank's figures cannot be true by `limits` (by rank:
// what the coordinator knows of each rank's device and model share; read
// only once no rank is pending). Reasons
// of a multi-rank trial name the rank ("rank 1 on worker w2: ...").
AttemptVerdict ApplyRankAnswer(TrialRun* trial, int rank_index, RankOutcome outcome,
                               const TrialMetrics& metrics,
                               const std::vector<MeasurementLimits>& limits);
// What the job record's algorithm text adds for a warm start of `trials`
// earlier trials on `device_type` devices: "; cost model warmed by 120
// earlier trials on cpu devices", "" for none.
std::string WarmStartNote(int trials, const std::string& device_type);
// The trial's metrics from its ranks' (every rank SUCCEEDED): rank 0's
// throughput and step times, the worst rank's memory and communication time.
TrialMetrics GangMetrics(const TrialRun& trial);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_RUN_H_
