// Plans a job's search (server/job_run.h PrepareSearch, then
// search/searcher.h CreateSearcher: the space's enumeration, pruning and
// ranking), which takes seconds for a huge space or pool, away from the job
// manager's lock, so heartbeats, time limits and other jobs never wait on it.
#ifndef AUTOACCEL_SERVER_SEARCH_PLANNER_H_
#define AUTOACCEL_SERVER_SEARCH_PLANNER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "search/searcher.h"
#include "search/step_time.h"
#include "server/job_run.h"

namespace autoaccel {

// What a job's search is planned from. While it is planned nothing else
// changes the job's spec, earlier trials, creation time or deadline (the job
// manager dispatches nothing for a job without a searcher), so the planner
// reads them without the manager's lock; the shared pointer keeps the job
// alive if it ends meanwhile.
struct SearchPlan {
  std::shared_ptr<JobRun> job;
  DeviceSpec device;
  int pool = 0;  // healthy devices of the job's type
  double confirm_reserve = 0;
  const Clock* clock = nullptr;
  // A job resumed after a coordinator restart: its recorded trials, which
  // the new searcher takes up (server/job_resume.h); empty for a new job.
  std::vector<ResumedTrial> resumed;
};

// The planned search, or why the request cannot be searched after all.
struct PlannedSearch {
  std::shared_ptr<JobRun> job;
  absl::StatusOr<std::unique_ptr<Searcher>> searcher;
  std::string description;  // PrepareSearch's ("" when the searcher describes itself)
  int candidates = 0;       // in the space the searcher got
  int warmed = 0;           // earlier observations that warmed its cost model
  int resumed = 0;          // recorded trials it took up (SearchPlan.resumed)
};

// Plans one job's search. Any thread.
PlannedSearch PlanSearch(const SearchPlan& plan);

// One background thread that plans the searches it is given, in order, and
// hands each result to `deliver` (on that thread, no lock of the planner
// held). Before Start and after Stop, Enqueue plans on the caller's thread
// and delivers before returning (the job manager's tests tick by hand).
class SearchPlanner {
 public:
  using Deliver = std::function<void(PlannedSearch)>;
  explicit SearchPlanner(Deliver deliver) : deliver_(std::move(deliver)) {}
  ~SearchPlanner() { Stop(); }

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Plans what is queued, then joins the thread.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // True when Enqueue plans on the thread.
  bool running() const ABSL_LOCKS_EXCLUDED(mu_);
  void Enqueue(SearchPlan plan) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  }

  const Deliver deliver_;
  mutable absl::Mutex mu_;
  std::deque<SearchPlan> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex thread_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::thread thread_ ABSL_GUARDED_BY(thread_mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_SEARCH_PLANNER_H_
