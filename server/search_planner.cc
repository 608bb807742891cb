#include "server/search_planner.h"

#include <utility>

namespace autoaccel {

PlannedSearch PlanSearch(const SearchPlan& plan) {
  PlannedSearch out;
  out.job = plan.job;
  SearchSetup setup;
  absl::StatusOr<std::string> description =
      PrepareSearch(*plan.job, plan.device, plan.pool, plan.confirm_reserve, plan.clock, &setup);
  if (!description.ok()) {
    out.searcher = description.status();
    return out;
  }
  out.description = *std::move(description);
  out.candidates = static_cast<int>(setup.candidates.size());
  out.warmed = setup.cost_model ? setup.cost_model->earlier_observations() : 0;
  out.searcher = CreateSearcher(std::move(setup));
  if (out.searcher.ok() && !plan.resumed.empty()) {
    (*out.searcher)->Resume(plan.resumed);
    out.resumed = static_cast<int>(plan.resumed.size());
  }
  return out;
}

void SearchPlanner::Start() {
  absl::MutexLock thread_lock(&thread_mu_);
  if (thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
    running_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

void SearchPlanner::Stop() {
  absl::MutexLock thread_lock(&thread_mu_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
}

bool SearchPlanner::running() const {
  absl::MutexLock lock(&mu_);
  return running_ && !stopping_;
}

void SearchPlanner::Enqueue(SearchPlan plan) {
  {
    absl::MutexLock lock(&mu_);
    if (running_ && !stopping_) {
      queue_.push_back(std::move(plan));
      return;
    }
  }
  deliver_(PlanSearch(plan));
}

void SearchPlanner::Run() {
  while (true) {
    SearchPlan plan;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &SearchPlanner::HasWorkLocked));
      if (queue_.empty()) return;  // stopping, nothing left
      plan = std::move(queue_.front());
      queue_.pop_front();
    }
    deliver_(PlanSearch(plan));
  }
}

}  // namespace autoaccel
