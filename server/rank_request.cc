#include "server/rank_request.h"

#include <utility>

#include "trial_contract/trial_spec.h"

namespace autoaccel {

std::vector<v1::RunTrialRequest> RankRequests(const JobSpec& spec, const TrialRun& trial,
                                              absl::Duration timeout) {
  const TrialRecord& rec = trial.record;
  // What every rank shares.
  TrialSpec shared;
  shared.world_size = static_cast<int>(trial.ranks.size());
  if (trial.master_port > 0) {
    shared.master_addr = trial.master_host;
    shared.master_port = trial.master_port;
  }
  TrialWork work = WorkOf(spec, trial);
  shared.model = std::move(work.model);
  shared.seq_len = spec.seq_len;
  shared.global_batch_size = work.global_batch_size;
  shared.strategy = work.strategy;
  shared.warmup_steps = spec.warmup_steps;
  shared.measured_steps =
      trial.record.measured_steps > 0 ? trial.record.measured_steps : spec.measured_steps;
  // A launcher's script counts its own steps (min_measured_seconds is the
  // engine's).
  shared.min_measured_seconds = spec.launcher ? 0 : spec.min_measured_seconds;

  std::vector<v1::RunTrialRequest> requests;
  requests.reserve(trial.ranks.size());
  // The ranks' neighbours on their workers, in one pass: a worker's ranks
  // are adjacent in rank order, so each run of one worker's ranks is one
  // group (group_rank counts the runs) sharing its devices.
  int group = 0;
  for (size_t first = 0; first < trial.ranks.size(); ++group) {
    const std::string& worker = trial.ranks[first].placed.worker_id;
    size_t end = first;
    std::vector<int> devices;
    for (; end < trial.ranks.size() && trial.ranks[end].placed.worker_id == worker; ++end) {
      devices.push_back(trial.ranks[end].placed.device_index);
    }
    for (size_t rank = first; rank < end; ++rank) {
      const PlacedRank& placed = trial.ranks[rank].placed;
      TrialSpec trial_spec = shared;
      trial_spec.rank = static_cast<int>(rank);
      trial_spec.local_rank = placed.local_rank;
      trial_spec.group_rank = group;
      trial_spec.local_world_size = static_cast<int>(devices.size());
      trial_spec.local_device_indices = devices;
      v1::RunTrialRequest request;
      request.set_trial_id(rec.trial_id);
      request.set_attempt(rec.attempt);
      request.set_device_index(placed.device_index);
      request.set_spec_json(TrialSpecToRequestJson(trial_spec).dump());
      request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
      if (spec.launcher) request.set_launcher(spec.launcher->name());
      requests.push_back(std::move(request));
    }
    first = end;
  }
  return requests;
}

}  // namespace autoaccel
