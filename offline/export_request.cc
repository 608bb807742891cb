#include "offline/export_request.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/convert.h"

namespace autoaccel {

namespace {

absl::StatusOr<ExportInput> FromJob(const v1::ExportRequest& request, const v1::Job& job) {
  ExportInput in;
  in.format = request.format().empty() ? job.launcher().format() : request.format();
  in.devices_per_node = request.devices_per_node();
  if (in.format.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("format: missing (job ", job.job_id(),
                     job.has_launcher() ? "'s launcher has no export format"
                                        : " ran the engine's trials, not a launcher's",
                     "; name the framework, e.g. deepspeed)"));
  }
  if (!job.has_best() || !job.best().has_strategy()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.job_id(), " (", job.state(),
                                                      ") has no best strategy to export yet"));
  }
  ASSIGN_OR_RETURN(in.strategy, FromProto(job.best().strategy()));
  const v1::TuneRequest& r = job.request();
  in.world_size = r.world_size() > 0 ? r.world_size() : 1;
  in.global_batch_size = r.global_batch_size();
  in.seq_len = r.seq_len();
  absl::StatusOr<std::optional<ModelSpec>> model = ModelOfSpec(r.model());
  if (model.ok()) in.model = *std::move(model);  // else: exported without the model's flags
  return in;
}

}  // namespace

absl::StatusOr<ExportInput> ExportInputOf(const v1::ExportRequest& request, const v1::Job* job) {
  if (job != nullptr) return FromJob(request, *job);
  if (request.strategy().empty()) {
    return absl::InvalidArgumentError("export needs a job or a strategy's text");
  }
  ExportInput in;
  in.format = request.format();
  in.devices_per_node = request.devices_per_node();
  if (in.format.empty()) {
    return absl::InvalidArgumentError("format: missing (the framework, e.g. deepspeed)");
  }
  absl::StatusOr<Strategy> s = ParseStrategyText(request.strategy());
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("strategy: ", s.status().message()));
  in.strategy = *std::move(s);
  if (request.world_size() < 1 || request.global_batch_size() < 1 || request.seq_len() < 1) {
    return absl::InvalidArgumentError(
        "a strategy's export needs world_size, global_batch_size and seq_len (positive)");
  }
  in.world_size = request.world_size();
  in.global_batch_size = request.global_batch_size();
  in.seq_len = request.seq_len();
  if (!request.model().family().empty()) {
    if (request.model().config_json().empty() && request.model().family() != "torchscript") {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.config_json: the model ", request.model().family(), " needs its config.json"));
    }
    ASSIGN_OR_RETURN(in.model, ModelOfSpec(request.model()));
  }
  return in;
}

}  // namespace autoaccel
