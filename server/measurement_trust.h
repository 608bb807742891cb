// What the coordinator holds against a trial's figures: the limits each of
// its ranks is judged by (server/measurement_check.h), and whether a repeat
// of a measurement on another worker gives one of the two workers away.
//
// Reads the job's state and the worker pool; changes neither. Called by the
// job manager with its mutex held (the pool locks itself).
#ifndef AUTOACCEL_SERVER_MEASUREMENT_TRUST_H_
#define AUTOACCEL_SERVER_MEASUREMENT_TRUST_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "server/job_run.h"
#include "server/measurement_check.h"
#include "server/worker_pool.h"

namespace autoaccel {

// The limits of each rank of the trial's current attempt (by rank): the
// model's FLOPs per token, the rank's device ceiling as the pool knows it,
// and (a job of the built-in engine) the weights the strategy holds per rank
// (search/memory_estimate.h).
std::vector<MeasurementLimits> MeasurementLimitsOf(const JobRun& job, const TrialRun& trial,
                                                   const WorkerPool& pool);

// Where a repeat of a measurement (a confirmation or a measure-again) is not
// to run: the workers that measured its strategy most often in the job so
// far, so that repeats alternate among the workers and the kept measurements
// come from more than one (WorkerPool::Place's `avoid`: ignored when only
// those workers can hold it); empty for a search trial.
std::set<std::string> WorkersToAvoid(const JobRun& job, const TrialRun& trial);

// A SUCCEEDED trial that repeats another SUCCEEDED one measured on other
// workers, when the two disagree beyond kPeerDisagreementFactor (per unit of
// their devices' peak): which of the two is distrusted and why.
struct PeerDistrust {
  TrialRun* trial = nullptr;  // the distrusted measurement
  std::string worker_id;
  std::string reason;
};
std::optional<PeerDistrust> PeerDisagreement(JobRun* job, TrialRun* ended, const WorkerPool& pool);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_MEASUREMENT_TRUST_H_
