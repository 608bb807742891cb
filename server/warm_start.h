// Where a new job's cost model starts: the measured trials of earlier jobs
// on the same device type (search/cost_model.h CostModel::WarmStart says
// what carries over from another model's trials and how much they weigh).
//
// Which trials: the newest SUCCEEDED trials of the newest jobs whose request
// names the same device_type ("cpu" or "cuda"), at most kMaxEarlierTrials
// (search/cost_model.h: the bound keeps each later refit cheap), each with
// the model and sequence length of its own job's stored request. Left out:
// torchscript models (their trials carry no shape to compute features
// from), launcher jobs (they measured the user's script, not the engine), trials that did not
// succeed (an out-of-memory bound depends on the device memory of that day, which is not stored),
// and rows whose strategy or request no longer parses (counted in `skipped`).
//
// When and where: JobManager::SubmitJob reads them once, after validating
// the request and before taking the manager's lock (one store read of at
// most kMaxEarlierTrials rows, each earlier job's request parsed once); the
// searcher's creation feeds them to the job's cost model and drops them.
// A torchscript job starts cold: its own features (one step, layer passes)
// are not those of the others.
//
// Thread-safe (the store is); no other state.
#ifndef AUTOACCEL_SERVER_WARM_START_H_
#define AUTOACCEL_SERVER_WARM_START_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/cost_model.h"
#include "server/store.h"

namespace autoaccel {

struct EarlierTrials {
  std::vector<EarlierTrial> trials;  // newest job first
  int skipped = 0;                   // rows that did not parse
};

// The store's error if the read fails (the caller starts cold then: a warm
// start is worth less than the job).
// `except_job`: a job whose own trials are left out (a resumed job's
// searcher takes them up itself).
absl::StatusOr<EarlierTrials> LoadEarlierTrials(Store* store, const std::string& device_type,
                                                int limit = kMaxEarlierTrials,
                                                const std::string& except_job = "");

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_WARM_START_H_
