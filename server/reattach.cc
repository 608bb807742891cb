#include "server/reattach.h"

#include <set>

namespace autoaccel {

ReportedRanks MatchReportedRanks(const std::map<std::string, std::shared_ptr<JobRun>>& jobs,
                                 const v1::RegisterRequest& registration) {
  const std::string& worker = registration.worker_id();
  ReportedRanks out;
  std::set<std::pair<std::string, int>> cancelled;
  for (const v1::RunningRank& r : registration.running_ranks()) {
    TrialRun* trial = nullptr;
    for (const auto& [id, job] : jobs) {
      if ((trial = FindTrial(*job, r.trial_id())) != nullptr) break;
    }
    const bool ours = trial != nullptr && trial->record.status == TrialStatus::kRunning &&
                      trial->record.attempt == r.attempt() && r.rank() >= 0 &&
                      r.rank() < static_cast<int>(trial->ranks.size()) &&
                      trial->ranks[r.rank()].placed.worker_id == worker;
    if (ours) {
      if (trial->awaiting_reattach && trial->ranks[r.rank()].placed.address.empty()) {
        out.attach.push_back({trial, &r});
      }
    } else if (cancelled.insert({r.trial_id(), r.attempt()}).second) {
      out.cancel.emplace_back(r.trial_id(), r.attempt());
    }
  }
  return out;
}

void AttachReportedRank(TrialRun* trial, const v1::RunningRank& rank, PlacedRank placed) {
  if (rank.rank() == 0 && rank.rendezvous_port() > 0) {
    trial->master_host = HostOfAddress(placed.address);
    trial->master_port = rank.rendezvous_port();
  }
  trial->ranks[rank.rank()].placed = std::move(placed);
  ++trial->ranks_attached;
}

AwaitingVerdicts JudgeAwaitingTrials(const std::map<std::string, std::shared_ptr<JobRun>>& jobs,
                                     const std::vector<std::string>& order,
                                     const std::string& worker) {
  AwaitingVerdicts out;
  for (const std::string& id : order) {
    auto it = jobs.find(id);
    if (it == jobs.end()) continue;
    JobRun* job = it->second.get();
    for (const auto& t : job->trials) {
      if (!t->awaiting_reattach) continue;
      bool here = false, missing = false;
      for (const Rank& rank : t->ranks) {
        if (rank.placed.worker_id != worker) continue;
        here = true;
        missing = missing || rank.placed.address.empty();
      }
      if (!here) continue;
      if (missing) {
        out.missing.emplace_back(job, t.get());
      } else if (t->ranks_attached == static_cast<int>(t->ranks.size())) {
        out.complete.emplace_back(job, t.get());
      }
    }
  }
  return out;
}

}  // namespace autoaccel
