// The records the coordinator keeps (server/store/store.h stores them):
// a job, a trial, a measured trial of an earlier job (the warm start's
// read), and an answer of the strategy database. Plain values: headers that
// only name a record include this, not the Store class.
#ifndef AUTOACCEL_SERVER_STORE_RECORDS_H_
#define AUTOACCEL_SERVER_STORE_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/job_state.h"  // JobState, JobStateName, IsTerminal
#include "spec/trial.h"

namespace autoaccel {

struct JobRecord {
  std::string job_id;  // REQUIRES: not empty
  JobState state = JobState::kQueued;
  std::string status_message;  // human-readable: "3/40 trials done", ...
  std::string request_json;    // the validated tuning request, serialised by the server
  std::string signature;       // model+hardware signature used as the strategies key
  absl::Time created_at;
  absl::Time started_at = absl::InfinitePast();
  absl::Time finished_at = absl::InfinitePast();
  absl::Time deadline = absl::InfiniteFuture();
  std::string best_trial_id;  // empty if none
  int trials_total = 0;       // size of the candidate list
  std::string algorithm;      // the search algorithm, "" until chosen: "auto: bayes (...)"
  // A job answered from the strategy database without running a trial: the
  // stored answer that answered it, as the server rendered it (a
  // v1::StrategyAnswer in JSON, kept as written even if the database's
  // answer changes later); "" for a job that searched.
  std::string answered_from;
  // A launcher job (TuneRequest.launcher): the launcher's definition when
  // the job was accepted (a v1::Launcher in JSON: its export format and
  // dimensions); "" for the engine's jobs.
  std::string launcher_json;
  // The user who submitted it (server/auth.h); "" when users are not
  // authenticated.
  std::string owner;
  // What an engine job measures, validated at admission
  // (server/warm_start.h's MeasuredModelJson: the model's family and
  // canonical config, and the sequence length); "" for a launcher job, a
  // torchscript model, and a job stored before schema 11.
  std::string model_json;
};

struct TrialRecord {
  std::string trial_id;       // REQUIRES: not empty; unique, e.g. "<job_id>-t0007"
  std::string job_id;         // REQUIRES: names an existing job
  int index = 0;              // order in which it was proposed
  int attempt = 1;            // >= 1; 0 for a PRUNED trial (never run)
  std::string strategy_text;  // canonical text
  std::string strategy_json;  // JSON form (dumped)
  TrialStatus status = TrialStatus::kPending;
  std::string reason;  // why FAILED/OOM/PRUNED/CANCELLED/TIMEOUT
  // Stored as TrialMetricsToJson text, so the JSON rules apply: a NaN or
  // infinite value comes back as 0.
  TrialMetrics metrics;
  std::string worker_id;  // comma-joined worker ids of the gang ranks
  absl::Time started_at = absl::InfinitePast();
  absl::Time finished_at = absl::InfinitePast();
  // Why each attempt that failed for a reason outside the strategy did
  // ("attempt N: rendezvous ...", "attempt N: worker lost ..."), oldest
  // first; such an attempt measured nothing and was retried, unless it was
  // the last (then `infrastructure` is set).
  std::vector<std::string> failed_attempts;
  // The trial ended FAILED for such a reason on its last attempt: the
  // strategy was never measured (the job's answer rests on partial evidence).
  bool infrastructure = false;
  // A confirmation trial: the trial_id of the measurement it repeats (the
  // job's best few are measured again before it ends); "" otherwise.
  std::string confirms;
  // What the job's cost model predicted for the strategy when the search
  // proposed it; nullopt for a trial it did not propose (a confirmation, a
  // pruned candidate) or one stored before schema 6.
  std::optional<TrialPrediction> predicted;
  // A proxy trial's own measurement (tune --proxy): `metrics` are then the
  // full run's figures extrapolated from it. nullopt for a trial measured
  // at full size, and one stored before schema 12.
  std::optional<ProxyMeasurement> proxy;
  // A proxy job's full-size check (confirms names the proxy trial whose
  // strategy it measures): the strategy measured at the job's full size,
  // to report the proxy's error; it never answers the job (server/settle.h
  // CanAnswer). False for every other trial, and one stored before schema 12.
  bool full_size = false;
  // The steps the searcher asked this trial to measure (successive halving
  // measures its early rungs with fewer); 0: the job's.
  int measured_steps = 0;
};

// A measured trial of an earlier job and that job's stored request (what a
// cost model's warm start reads: server/warm_start.h).
struct MeasuredTrialRecord {
  TrialRecord trial;
  // Its job's: what it measured (JobRecord::model_json), and its request
  // for a job stored before that was kept ("" when model_json is set).
  std::string model_json;
  std::string request_json;
};

// The strategy database: the best answer per signature.
// The key (`signature`) leaves the engine version out: a signature has one
// answer, of whichever version ReplacesStoredAnswer let stay.
// How sure the job that found an answer was of it (server/settle.h), as
// stored with the answer.
struct AnswerCertainty {
  // "settled", "tie" or "provisional"; "" for an answer stored before
  // certainties were recorded (schema < 10).
  std::string certainty;
  double figure = 0;  // tokens/s: the mean of the kept measurements
  double interval_low = 0;
  double interval_high = 0;  // the figure's 95% interval
  double spread = 0;         // (max - min) / min of the kept measurements
  int measurements = 0;
  std::vector<std::string> tied_with;  // a tie's other strategies (text)
};

struct StrategyRecord {
  std::string signature;  // primary key; REQUIRES: not empty
  std::string model_family;
  std::string model_config_json;
  int seq_len = 0;
  int global_batch_size = 0;
  std::string hardware;     // e.g. "cpu x1"
  std::string device_type;  // "cpu", "cuda" ("" in rows of schema < 5 whose hardware did not say)
  std::string strategy_text;
  std::string strategy_json;
  TrialMetrics metrics;
  std::string job_id;     // job that found it; not checked against the jobs table
  absl::Time updated_at;  // when this answer was stored
  // `metrics` come from a confirmation trial (the strategy was measured at
  // least twice); an unconfirmed answer gives way to a confirmed one.
  bool confirmed = false;
  // The engine version that measured it (common/engine_version.h); 0 for an
  // answer stored before versions were recorded (schema < 5).
  int engine_version = 0;
  // When the signature got its first answer: FinishJob keeps it when a new
  // answer replaces the stored one (rows of schema < 5: their updated_at).
  absl::Time created_at = absl::InfinitePast();
  AnswerCertainty certainty;  // schema 10
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_STORE_RECORDS_H_
