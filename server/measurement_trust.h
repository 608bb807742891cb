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

// The workers that measured what `trial` repeats (a confirmation or a
// repeat: the trial it confirms), for the pool to place it elsewhere
// (WorkerPool::Place's `avoid`); empty for a search trial.
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
