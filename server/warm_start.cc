#include "server/warm_start.h"

#include <google/protobuf/util/json_util.h>

#include <map>
#include <optional>
#include <utility>

#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "proto/autoaccel.pb.h"
#include "server/tune_request.h"

namespace autoaccel {
namespace {

struct JobShape {
  ModelSpec model;
  int seq_len = 0;
};

// The model and sequence length of a job stored before schema 11, from its
// request; nullopt when it does not parse any more (or is a torchscript
// model's, or a launcher job's).
std::optional<JobShape> ShapeOfRequest(const std::string& request_json) {
  v1::TuneRequest request;
  if (!google::protobuf::util::JsonStringToMessage(request_json, &request).ok()) {
    return std::nullopt;
  }
  // A launcher job measured the user's script, not the engine.
  if (!request.launcher().empty()) return std::nullopt;
  absl::StatusOr<ModelSpec> model = ModelFromRequest(request.model());
  if (!model.ok() || model->IsTorchScript() || request.seq_len() <= 0) return std::nullopt;
  return JobShape{*std::move(model), request.seq_len()};
}

// What a job measured: its stored model, or for an older job its request's.
std::optional<JobShape> ShapeOf(const MeasuredTrialRecord& row) {
  if (row.model_json.empty()) return ShapeOfRequest(row.request_json);
  const nlohmann::json j =
      nlohmann::json::parse(row.model_json, nullptr, /*allow_exceptions=*/false);
  int seq_len = 0;
  if (!j.is_object() || !j.contains("family") || !j["family"].is_string() ||
      !j.contains("config") || !j.contains("seq_len") || !JsonToInteger(j["seq_len"], &seq_len) ||
      seq_len <= 0) {
    return std::nullopt;
  }
  absl::StatusOr<ModelSpec> model = ModelSpecFromJson(j["family"].get<std::string>(), j["config"]);
  if (!model.ok()) return std::nullopt;
  return JobShape{*std::move(model), seq_len};
}

}  // namespace

std::string MeasuredModelJson(const JobSpec& spec) {
  // A launcher job measured the user's script; a torchscript model has no
  // shape to compute features from.
  if (spec.launcher || spec.model.IsTorchScript()) return "";
  return nlohmann::json{{"family", spec.model.family},
                        {"config", spec.model.ToConfigJson()},
                        {"seq_len", spec.seq_len}}
      .dump();
}

absl::StatusOr<EarlierTrials> LoadEarlierTrials(Store* store, const std::string& device_type,
                                                int limit, const std::string& except_job) {
  ASSIGN_OR_RETURN(std::vector<MeasuredTrialRecord> rows,
                   store->ListMeasuredTrials(device_type, limit));
  EarlierTrials out;
  std::map<std::string, std::optional<JobShape>> shapes;  // by job id
  for (const MeasuredTrialRecord& row : rows) {
    if (row.trial.job_id == except_job) continue;
    auto it = shapes.find(row.trial.job_id);
    if (it == shapes.end()) it = shapes.emplace(row.trial.job_id, ShapeOf(row)).first;
    absl::StatusOr<Strategy> strategy = ParseStrategyText(row.trial.strategy_text);
    if (!it->second || !strategy.ok()) {
      ++out.skipped;
      continue;
    }
    out.trials.push_back(
        EarlierTrial{it->second->model, it->second->seq_len, *strategy, row.trial.metrics});
  }
  return out;
}

std::shared_ptr<const EarlierTrials> EarlierTrialsCache::FreshLocked(
    const std::string& device_type) const {
  auto it = cached_.find(device_type);
  if (it == cached_.end() || it->second.generation != generation_ ||
      clock_->Now() - it->second.read_at > kEarlierTrialsMaxAge) {
    return nullptr;
  }
  return it->second.trials;
}

absl::StatusOr<std::shared_ptr<const EarlierTrials>> EarlierTrialsCache::Get(
    const std::string& device_type) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto fresh = FreshLocked(device_type)) return fresh;
  }
  absl::MutexLock load(&load_mu_);
  uint64_t generation = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto fresh = FreshLocked(device_type)) return fresh;  // read while this one waited
    generation = generation_;
  }
  const absl::Time read_at = clock_->Now();
  ASSIGN_OR_RETURN(EarlierTrials read, LoadEarlierTrials(store_, device_type));
  auto trials = std::make_shared<const EarlierTrials>(std::move(read));
  absl::MutexLock lock(&mu_);
  if (generation == generation_) cached_[device_type] = Entry{generation, read_at, trials};
  return trials;
}

void EarlierTrialsCache::Invalidate() {
  absl::MutexLock lock(&mu_);
  ++generation_;
}

}  // namespace autoaccel
