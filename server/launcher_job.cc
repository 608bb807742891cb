#include "server/launcher_job.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "export/exporter.h"
#include "export/format_registry.h"
#include "search/field_table.h"
#include "search/strategy_fields.h"

namespace autoaccel {
namespace {

// One strategy dimension as a launcher restricts it: the request field that
// gives its candidates (empty when none does: it is derived), how many it
// gives, and how the space keeps only the default value.
struct LauncherDimension {
  absl::string_view key;            // kStrategyFields' JSON key
  absl::string_view request_field;  // TuneRequest field of its candidates; "" = derived
  int (*given)(const v1::TuneRequest&);
  void (*keep_default)(SpaceRequest*);
};

int None(const v1::TuneRequest&) { return 0; }
void Nothing(SpaceRequest*) {}

// Every row of kStrategyFields has one here (launcher_job_test checks it).
constexpr LauncherDimension kLauncherDimensions[] = {
    // world_size / (tensor * pipeline): follows the layout.
    {"data_parallel", "", &None, &Nothing},
    {"tensor_parallel", "tensor_parallel_sizes",
     [](const v1::TuneRequest& r) { return r.tensor_parallel_sizes_size(); },
     [](SpaceRequest* s) { s->tensor_parallel_sizes = {1}; }},
    {"pipeline_parallel", "pipeline_parallel_sizes",
     [](const v1::TuneRequest& r) { return r.pipeline_parallel_sizes_size(); },
     [](SpaceRequest* s) { s->pipeline_parallel_sizes = {1}; }},
    {"sharding", "shardings", [](const v1::TuneRequest& r) { return r.shardings_size(); },
     [](SpaceRequest* s) { s->shardings = {Sharding::kNone}; }},
    {"sequence_parallel", "sequence_parallel",
     [](const v1::TuneRequest& r) { return r.sequence_parallel_size(); },
     [](SpaceRequest* s) { s->sequence_parallel_modes = {false}; }},
    {"pipeline_schedule", "pipeline_schedules",
     [](const v1::TuneRequest& r) { return r.pipeline_schedules_size(); },
     [](SpaceRequest* s) { s->pipeline_schedules = {PipelineSchedule::k1F1B}; }},
    // Model chunks exist only for the interleaved schedule: a script that
    // cannot be told their number runs 1f1b.
    {"virtual_stages", "virtual_stages",
     [](const v1::TuneRequest& r) { return r.virtual_stages_size(); },
     [](SpaceRequest* s) { s->pipeline_schedules = {PipelineSchedule::k1F1B}; }},
    // One choice with grad_accum_steps (LauncherFixesMicroBatch).
    {"micro_batch_size", "micro_batch_sizes",
     [](const v1::TuneRequest& r) { return r.micro_batch_sizes_size(); }, &Nothing},
    {"grad_accum_steps", "", &None, &Nothing},
    {"precision", "precisions", [](const v1::TuneRequest& r) { return r.precisions_size(); },
     [](SpaceRequest* s) { s->precisions = {Precision::kFp32}; }},
    {"checkpointing", "checkpointings",
     [](const v1::TuneRequest& r) { return r.checkpointings_size(); },
     [](SpaceRequest* s) { s->checkpointings = {Checkpointing::kNone}; }},
    {"checkpoint_percent", "checkpoint_percents",
     [](const v1::TuneRequest& r) { return r.checkpoint_percents_size(); },
     [](SpaceRequest* s) { s->checkpoint_percents = {100}; }},
    {"attention", "attentions", [](const v1::TuneRequest& r) { return r.attentions_size(); },
     [](SpaceRequest* s) { s->attentions = {Attention::kMath}; }},
    {"optimizer", "optimizers", [](const v1::TuneRequest& r) { return r.optimizers_size(); },
     [](SpaceRequest* s) { s->optimizers = {Optimizer::kAdamW}; }},
    {"offload", "offloads", [](const v1::TuneRequest& r) { return r.offloads_size(); },
     [](SpaceRequest* s) { s->offloads = {Offload::kNone}; }},
};

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
  for (const std::string& key : keys) {  // a new strategy field needs its row above
    if (std::none_of(std::begin(kLauncherDimensions), std::end(kLauncherDimensions),
                     [&](const LauncherDimension& d) { return d.key == key; })) {
      return absl::InternalError(
          absl::StrCat("strategy field '", key, "' has no row in kLauncherDimensions"));
    }
  }
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
  for (const LauncherDimension& d : kLauncherDimensions) {
    const bool tied_batch = d.key == "micro_batch_size" && !LauncherFixesMicroBatch(launcher);
    if (Honours(launcher, d.key) || tied_batch) continue;
    if (d.given(request) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(d.request_field, ": launcher '", launcher.name(), "' does not honour ",
                       d.key, " (it honours: ", honoured, "); leave the candidates out"));
    }
    d.keep_default(space);
  }
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
