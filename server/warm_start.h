// Where a new job's cost model starts: the measured trials of earlier jobs
// on the same device type (search/cost_model.h CostModel::WarmStart says
// what carries over from another model's trials and how much they weigh).
//
// Which trials: the newest SUCCEEDED trials of the newest jobs whose request
// names the same device_type ("cpu" or "cuda"), at most kMaxEarlierTrials
// (search/cost_model.h: the bound keeps each later refit cheap), each with
// the model and sequence length its own job measured (stored with the job at
// admission: MeasuredModelJson; a job stored before schema 11 has its
// request read instead). Left out:
// torchscript models (their trials carry no shape to compute features
// from), launcher jobs (they measured the user's script, not the engine), trials that did not
// succeed (an out-of-memory bound depends on the device memory of that day, which is not stored),
// and rows whose strategy or request no longer parses (counted in `skipped`).
//
// When and where: JobManager::SubmitJob takes them from an
// EarlierTrialsCache after validating the request and before taking the
// manager's lock: one store read of at most kMaxEarlierTrials rows (each
// earlier job's model read once) serves every submission until a job
// finishes or kEarlierTrialsMaxAge passes, so a burst of submissions reads
// the store once; the searcher's creation feeds them to the job's cost model
// and drops its reference.
// A torchscript job starts cold: its own features (one step, layer passes)
// are not those of the others.
//
// Thread-safe.
#ifndef AUTOACCEL_SERVER_WARM_START_H_
#define AUTOACCEL_SERVER_WARM_START_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "search/cost_model.h"
#include "server/store/store.h"
#include "server/tune_request.h"

namespace autoaccel {

// What an engine job measures, as stored with it (JobRecord::model_json):
// its validated model's family and canonical config (ModelSpec::
// ToConfigJson) and its sequence length, as JSON; "" for a launcher job or a
// torchscript model, whose trials feed no warm start. Pure.
std::string MeasuredModelJson(const JobSpec& spec);

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

// How long a cached read serves submissions while no job finishes (trials
// of jobs still running are recorded meanwhile).
inline constexpr absl::Duration kEarlierTrialsMaxAge = absl::Seconds(10);

// LoadEarlierTrials per device type, read once and shared until
// Invalidate() (a job finished: its trials count now) or kEarlierTrialsMaxAge.
// Concurrent misses wait for one read. `store` and `clock` must outlive it.
class EarlierTrialsCache {
 public:
  EarlierTrialsCache(Store* store, const Clock* clock) : store_(store), clock_(clock) {}
  // The store's error when the read fails (nothing is cached then).
  absl::StatusOr<std::shared_ptr<const EarlierTrials>> Get(const std::string& device_type)
      ABSL_LOCKS_EXCLUDED(mu_, load_mu_);
  void Invalidate() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    uint64_t generation = 0;
    absl::Time read_at;
    std::shared_ptr<const EarlierTrials> trials;
  };
  // The cached read for `device_type` if still fresh, else null.
  std::shared_ptr<const EarlierTrials> FreshLocked(const std::string& device_type) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  Store* const store_;
  const Clock* const clock_;
  absl::Mutex load_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one read at a time
  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Entry> cached_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_WARM_START_H_
