// What a worker is sent to run one rank of a trial attempt: the RunTrial
// request (trial id, attempt, device, timeout; never the user's model file,
// which server/model_file_delivery.h sends apart when needed; for a
// launcher job the launcher) with the part of the trial spec the
// coordinator owns (trial_contract/trial_spec.h: the gang's size, rank,
// rendezvous and the rank's neighbours on its worker, the model, batch,
// strategy and step counts). The only place the gang's geometry is derived.
//
// Pure: no I/O; any thread.
#ifndef AUTOACCEL_SERVER_RANK_REQUEST_H_
#define AUTOACCEL_SERVER_RANK_REQUEST_H_

#include <vector>

#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"
#include "server/job_run.h"
#include "server/tune_request.h"

namespace autoaccel {

// The requests for every rank of `trial`'s current attempt (its ranks and
// rendezvous set; a worker's ranks adjacent in rank order, as placement
// gives them) of a job of `spec`, by rank, each to answer within `timeout`.
// Linear in the gang's size (it runs under the job manager's lock).
std::vector<v1::RunTrialRequest> RankRequests(const JobSpec& spec, const TrialRun& trial,
                                              absl::Duration timeout);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_RANK_REQUEST_H_
