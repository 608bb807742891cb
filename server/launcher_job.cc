#include "server/launcher_job.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "export/exporter.h"
#include "export/format_registry.h"
#include "proto/request_space.h"
#include "search/space_dimensions.h"
#include "spec/field_table.h"
#include "spec/strategy_fields.h"

namespace autoaccel {
namespace {

bool Honours(const v1::Launcher& launcher, absl::string_view key) {
  return launcher.dimensions().empty() ||
         std::find(launcher.dimensions().begin(), launcher.dimensions().end(), key) !=
             launcher.dimensions().end();
}

}  // namespace

ModelSpec UnknownLauncherModel() {
  ModelSpec m;
  m.family = "torchscript";
  m.n_positions = ModelSpec::kTorchScriptMaxSeqLen;
  return m;
}

bool IsUnknownLauncherModel(const ModelSpec& model) {
  return model.IsTorchScript() && model.script_digest.empty() && model.input_spec.empty();
}

std::vector<std::string> LauncherDimensionKeys() {
  std::vector<std::string> keys;
  ForEachRow(kStrategyFields, [&](const auto& field) { keys.emplace_back(field.name); });
  return keys;
}

bool LauncherFixesMicroBatch(const v1::Launcher& launcher) {
  return !Honours(launcher, "micro_batch_size") && !Honours(launcher, "grad_accum_steps");
}

absl::Status RestrictSpaceToLauncher(const v1::Launcher& launcher, const v1::TuneRequest& request,
                                     SpaceRequest* space) {
  const std::vector<std::string> keys = LauncherDimensionKeys();
  for (const std::string& d : launcher.dimensions()) {
    if (std::find(keys.begin(), keys.end(), d) == keys.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("launcher: '", launcher.name(), "' lists the dimension '", d,
                       "', which is no strategy field (known: ", absl::StrJoin(keys, ", "), ")"));
    }
  }
  const std::string honoured = launcher.dimensions().empty()
                                   ? std::string("every dimension")
                                   : absl::StrJoin(launcher.dimensions(), ", ");
  // Each searched dimension the script cannot be told keeps its default
  // (search/space_dimensions.h); the derived ones (data_parallel,
  // grad_accum_steps) follow the others.
  absl::Status refused;
  AnyRow(kSpaceDimensions, [&](const auto& row) {
    const bool tied_batch = row.key == "micro_batch_size" && !LauncherFixesMicroBatch(launcher);
    if (Honours(launcher, row.key) || tied_batch) return false;
    if (CandidatesGiven(request, row.request_field) > 0) {
      refused = absl::InvalidArgumentError(
          absl::StrCat(row.request_field, ": launcher '", launcher.name(), "' does not honour ",
                       row.key, " (it honours: ", honoured, "); leave the candidates out"));
      return true;
    }
    if (row.launcher_default.has_value()) space->*row.member = {*row.launcher_default};
    return false;
  });
  RETURN_IF_ERROR(refused);
  // Model chunks exist only for the interleaved schedule: a script that
  // cannot be told their number runs 1f1b.
  if (!Honours(launcher, "virtual_stages")) space->pipeline_schedules = {PipelineSchedule::k1F1B};
  if (LauncherFixesMicroBatch(launcher)) {
    // The per-rank batch of every data-parallel degree the layouts may
    // have, as one micro-batch (the caller drops the others).
    space->micro_batch_sizes.clear();
    const int world = std::max(1, request.world_size());
    const int batch = request.global_batch_size();
    for (int dp = 1; dp <= world; ++dp) {
      if (world % dp == 0 && batch > 0 && batch % dp == 0) {
        space->micro_batch_sizes.push_back(batch / dp);
      }
    }
  }
  space->engine_runs_trials = false;
  return absl::OkStatus();
}

absl::Status KeepExportable(const v1::Launcher& launcher, const ModelSpec& model, int world_size,
                            int global_batch_size, int seq_len, std::vector<Strategy>* space) {
  if (launcher.format().empty()) return absl::OkStatus();
  if (FindExportFormat(launcher.format()) == nullptr &&
      !absl::StartsWith(launcher.format(), "torchrun:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("launcher: '", launcher.name(), "' has the unknown export format '",
                     launcher.format(), "' (known: ", ExportFormatList(), ")"));
  }
  ExportInput in;
  in.world_size = world_size;
  in.global_batch_size = global_batch_size;
  in.seq_len = seq_len;
  in.format = launcher.format();
  if (!IsUnknownLauncherModel(model)) in.model = model;
  const size_t before = space->size();
  std::string example;
  absl::Status error;
  space->erase(std::remove_if(space->begin(), space->end(),
                              [&](const Strategy& s) {
                                if (!error.ok()) return false;
                                in.strategy = s;
                                absl::StatusOr<ExportResult> out = Export(in);
                                if (!out.ok()) {
                                  error = out.status();
                                  return false;
                                }
                                if (!out->rejected()) return false;
                                if (example.empty()) {
                                  for (const FidelityRow& row : out->fidelity) {
                                    if (row.status != FidelityStatus::kRejected) continue;
                                    example = absl::StrCat(StrategyToText(s), ": ", row.dimension,
                                                           " ", row.value, ": ", row.note);
                                    break;
                                  }
                                }
                                return true;
                              }),
               space->end());
  RETURN_IF_ERROR(error);
  if (space->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("launcher: the ", launcher.format(), " format of launcher '", launcher.name(),
                     "' rejects all ", before, " candidate strategies (e.g. ", example, ")"));
  }
  return absl::OkStatus();
}

}  // namespace autoaccel
