#include "server/measurement_trust.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "search/memory_estimate.h"

namespace autoaccel {
namespace {

// The peak of the device rank 0 of the trial's attempt ran on (0 unknown).
double RankZeroPeak(const TrialRun& trial, const WorkerPool& pool) {
  if (trial.ranks.empty()) return 0;
  const PlacedRank& r = trial.ranks[0].placed;
  return pool.CeilingOf(r.worker_id, r.device_index).peak_flops;
}

}  // namespace

std::vector<MeasurementLimits> MeasurementLimitsOf(const JobRun& job, const TrialRun& trial,
                                                   const WorkerPool& pool) {
  MeasurementLimits common;
  const TrialWork work = WorkOf(job.spec, trial);  // a proxy's own model and strategy
  common.flops_per_token = work.model.TrainingFlopsPerToken(job.spec.seq_len);
  common.ranks = static_cast<int>(trial.ranks.size());
  if (!job.spec.launcher) {
    // A launcher's script holds what it likes; the engine holds what the
    // strategy says.
    common.weight_bytes = EstimateMemory(work.model, job.spec.seq_len, work.strategy).parameters;
  }
  std::vector<MeasurementLimits> out;
  for (const Rank& rank : trial.ranks) {
    MeasurementLimits limits = common;
    const WorkerPool::DeviceCeiling ceiling =
        pool.CeilingOf(rank.placed.worker_id, rank.placed.device_index);
    limits.device_peak_flops = ceiling.peak_flops;
    limits.peak_from_catalog = ceiling.peak_from_catalog;
    limits.device_memory_bytes = ceiling.memory_bytes;
    out.push_back(limits);
  }
  return out;
}

std::set<std::string> WorkersToAvoid(const JobRun& job, const TrialRun& trial) {
  if (trial.record.confirms.empty()) return {};
  // How often each worker measured the strategy so far (this trial's
  // earlier attempts aside).
  std::map<std::string, int> measured;
  for (const auto& other : job.trials) {
    if (other->record.worker_id.empty() || other.get() == &trial ||
        other->record.strategy_text != trial.record.strategy_text) {
      continue;
    }
    for (absl::string_view id : absl::StrSplit(other->record.worker_id, ',', absl::SkipEmpty())) {
      ++measured[std::string(id)];
    }
  }
  int most = 0;
  for (const auto& [id, n] : measured) most = std::max(most, n);
  std::set<std::string> avoid;
  for (const auto& [id, n] : measured) {
    if (n == most) avoid.insert(id);
  }
  return avoid;
}

std::optional<PeerDistrust> PeerDisagreement(JobRun* job, TrialRun* ended, const WorkerPool& pool) {
  // A full-size check measures what its proxy trial extrapolated: they may
  // differ by the extrapolation's error, which says nothing of the workers.
  if (ended->record.confirms.empty() || ended->record.status != TrialStatus::kSucceeded ||
      ended->record.full_size) {
    return std::nullopt;
  }
  TrialRun* first = FindTrial(*job, ended->record.confirms);
  if (first == nullptr || first->record.status != TrialStatus::kSucceeded ||
      first->record.worker_id == ended->record.worker_id) {
    return std::nullopt;
  }
  const double a = first->record.metrics.tokens_per_second;
  const double b = ended->record.metrics.tokens_per_second;
  const double peak_a = RankZeroPeak(*first, pool), peak_b = RankZeroPeak(*ended, pool);
  const int which = DistrustedOfPair(a, peak_a, b, peak_b);
  if (which == 0) return std::nullopt;
  PeerDistrust out;
  TrialRun* liar = which == 1 ? first : ended;
  const TrialRun& peer = which == 1 ? *ended : *first;
  out.trial = liar;
  out.worker_id = liar->record.worker_id;
  out.reason = absl::StrFormat(
      "measured %.4g tokens/s where worker %s measured %.4g for the same strategy (trial %d), "
      "more than %.0fx apart%s",
      liar->record.metrics.tokens_per_second, peer.record.worker_id,
      peer.record.metrics.tokens_per_second, peer.record.index, kPeerDisagreementFactor,
      peak_a > 0 && peak_b > 0 ? " per unit of their devices' peak" : "");
  return out;
}

}  // namespace autoaccel
