// The atorch format: ATorch auto_accelerate's load_strategy list, in the
// vocabulary ParseAtorchStrategy (search/atorch_strategy.h) reads, so that
// exporting and loading it back (--load-strategy) round-trips.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/formats.h"

namespace autoaccel {

FormatOutput ExportAtorch(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  std::vector<std::string> methods;
  std::vector<std::string> groups;
  if (s.data_parallel > 1) groups.push_back(absl::StrCat("(\"data\", ", s.data_parallel, ")"));
  if (s.tensor_parallel > 1)
    groups.push_back(absl::StrCat("(\"tensor\", ", s.tensor_parallel, ")"));
  if (s.pipeline_parallel > 1) {
    groups.push_back(absl::StrCat("(\"pipeline\", ", s.pipeline_parallel, ")"));
  }
  if (!groups.empty()) {
    methods.push_back(
        absl::StrCat("(\"parallel_mode\", ([", absl::StrJoin(groups, ", "), "], None))"));
  }
  rows.Exact(&Strategy::data_parallel, "parallel_mode data");
  rows.Exact(&Strategy::tensor_parallel, "parallel_mode tensor");
  rows.Exact(&Strategy::pipeline_parallel, "parallel_mode pipeline");
  if (s.pipeline_parallel == 1) {
    rows.Exact(&Strategy::pipeline_schedule, "no pipeline");
    rows.Exact(&Strategy::virtual_stages, "no pipeline");
  } else {
    rows.NotExpressible(&Strategy::pipeline_schedule,
                        "load_strategy has no pipeline schedule: ATorch picks its own");
    rows.NotExpressible(&Strategy::virtual_stages, "load_strategy has no virtual stages");
  }
  if (s.sharding != Sharding::kNone)
    methods.push_back(absl::StrCat("\"", ShardingName(s.sharding), "\""));
  rows.Exact(&Strategy::sharding);
  if (s.sequence_parallel) methods.push_back("\"sequence_parallel\"");
  rows.Exact(&Strategy::sequence_parallel);
  rows.NotExpressible(&Strategy::micro_batch_size,
                      "not in load_strategy: the batch size of your DataLoader");
  rows.NotExpressible(&Strategy::grad_accum_steps,
                      "not in load_strategy: accumulate in your training loop");
  switch (s.precision) {
    case Precision::kFp32:
      rows.Exact(&Strategy::precision, "no amp method");
      break;
    case Precision::kBf16:
      methods.push_back("(\"amp_native\", {\"dtype\": \"bf16\"})");
      rows.Exact(&Strategy::precision, "amp_native bf16");
      break;
    case Precision::kFp16:
      methods.push_back("(\"amp_native\", {\"dtype\": \"fp16\"})");
      rows.Exact(&Strategy::precision, "amp_native fp16 (dynamic loss scaling)");
      break;
    case Precision::kPureBf16:
      methods.push_back("(\"half\", \"bf16\")");
      rows.Exact(&Strategy::precision, "half bf16");
      break;
  }
  switch (s.checkpointing) {
    case Checkpointing::kNone:
      rows.Exact(&Strategy::checkpointing, "no checkpoint method");
      break;
    case Checkpointing::kFull:
      methods.push_back("\"checkpoint\"");
      rows.Exact(&Strategy::checkpointing, "checkpoint (whole layers)");
      break;
    case Checkpointing::kSelective:
      methods.push_back("\"checkpoint\"");
      rows.Approximated(&Strategy::checkpointing,
                        "ATorch's checkpoint recomputes whole layers; it has no selective mode");
      break;
  }
  if (s.checkpoint_percent == 100) {
    rows.Exact(&Strategy::checkpoint_percent);
  } else {
    rows.Approximated(&Strategy::checkpoint_percent,
                      "checkpoint applies to every layer of the classes it wraps");
  }
  if (s.attention == Attention::kSdpa) methods.push_back("\"module_replace\"");
  rows.Exact(&Strategy::attention, s.attention == Attention::kSdpa
                                       ? "module_replace (fused attention)"
                                       : "no module_replace");
  if (s.optimizer == Optimizer::kFusedAdamW) methods.push_back("\"fused_optimizer\"");
  rows.Exact(&Strategy::optimizer);
  if (s.offload == Offload::kCpu) methods.push_back("\"cpu_offload\"");
  rows.Exact(&Strategy::offload);

  out.files.emplace_back("load_strategy.txt",
                         absl::StrCat("[", absl::StrJoin(methods, ", "), "]\n"));
  out.entry = "train.py";
  out.command = TorchrunCommand(c, out.entry);
  return out;
}

}  // namespace autoaccel
