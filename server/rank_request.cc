#include "server/rank_request.h"

#include "trial_contract/trial_spec.h"

namespace autoaccel {

v1::RunTrialRequest RankRequest(const JobSpec& spec, const TrialRun& trial, int rank,
                                absl::Duration timeout) {
  const TrialRecord& rec = trial.record;
  const PlacedRank& placed = trial.ranks[rank].placed;
  TrialSpec trial_spec;
  trial_spec.world_size = static_cast<int>(trial.ranks.size());
  trial_spec.rank = rank;
  trial_spec.local_rank = placed.local_rank;
  // The rank's neighbours on its worker (a worker's ranks are adjacent in
  // rank order): which of the trial's workers it is, and their devices.
  for (int i = 1; i <= rank; ++i) {
    if (trial.ranks[i].placed.worker_id != trial.ranks[i - 1].placed.worker_id) {
      ++trial_spec.group_rank;
    }
  }
  for (const Rank& other : trial.ranks) {
    if (other.placed.worker_id == placed.worker_id) {
      trial_spec.local_device_indices.push_back(other.placed.device_index);
    }
  }
  trial_spec.local_world_size = static_cast<int>(trial_spec.local_device_indices.size());
  if (trial.master_port > 0) {
    trial_spec.master_addr = trial.master_host;
    trial_spec.master_port = trial.master_port;
  }
  trial_spec.model = spec.model;
  trial_spec.seq_len = spec.seq_len;
  trial_spec.global_batch_size = spec.global_batch_size;
  trial_spec.strategy = trial.strategy;
  trial_spec.warmup_steps = spec.warmup_steps;
  trial_spec.measured_steps =
      trial.record.measured_steps > 0 ? trial.record.measured_steps : spec.measured_steps;
  // A launcher's script counts its own steps (min_measured_seconds is the
  // engine's).
  trial_spec.min_measured_seconds = spec.launcher ? 0 : spec.min_measured_seconds;
  v1::RunTrialRequest request;
  request.set_trial_id(rec.trial_id);
  request.set_attempt(rec.attempt);
  request.set_device_index(placed.device_index);
  request.set_spec_json(TrialSpecToRequestJson(trial_spec).dump());
  request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
  if (spec.launcher) request.set_launcher(spec.launcher->name());
  return request;
}

}  // namespace autoaccel
