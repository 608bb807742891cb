#include "export/exporter.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "export/fidelity.h"
#include "export/format_registry.h"

namespace autoaccel {
namespace {

absl::Status CheckInput(const ExportInput& in) {
  const Strategy& s = in.strategy;
  RETURN_IF_ERROR(CheckLayout(s, StrategyForm::kText));
  RETURN_IF_ERROR(CheckCheckpointPercent(s, "ckpt_pct"));
  if (in.world_size < 1 || in.world_size != s.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size ", in.world_size,
        " does not match the strategy's dp*cp*tp*pp = ", s.data_parallel, "*", s.context_parallel,
        "*", s.tensor_parallel, "*", s.pipeline_parallel, " = ", s.world_size()));
  }
  const int64_t per_step = int64_t{s.micro_batch_size} * s.grad_accum_steps * s.data_parallel;
  if (in.global_batch_size != per_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global-batch-size ", in.global_batch_size, " does not match the strategy's mbs*ga*dp = ",
        s.micro_batch_size, "*", s.grad_accum_steps, "*", s.data_parallel, " = ", per_step));
  }
  if (in.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq-len must be a positive integer, got ", in.seq_len));
  }
  if (in.devices_per_node < 0 ||
      (in.devices_per_node > 0 && in.world_size % in.devices_per_node != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--devices-per-node ", in.devices_per_node,
                                                   " must be a positive divisor of the world size ",
                                                   in.world_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view FidelityStatusName(FidelityStatus s) {
  switch (s) {
    case FidelityStatus::kExact:
      return "exact";
    case FidelityStatus::kApproximated:
      return "approximated";
    case FidelityStatus::kNotExpressible:
      return "not_expressible";
    case FidelityStatus::kRejected:
      return "rejected";
  }
  return "?";
}

bool ExportResult::rejected() const {
  return std::any_of(fidelity.begin(), fidelity.end(),
                     [](const FidelityRow& r) { return r.status == FidelityStatus::kRejected; });
}

absl::StatusOr<ExportResult> Export(const ExportInput& in) {
  // "torchrun:F": format F, launched by torchrun.
  absl::string_view name = in.format;
  bool torchrun_wrap = false;
  if (absl::StartsWith(name, "torchrun:")) {
    name.remove_prefix(9);
    torchrun_wrap = true;
  }
  const ExportFormat* format = FindExportFormat(name);
  if (format == nullptr || (torchrun_wrap && name == "torchrun")) {
    return absl::InvalidArgumentError(absl::StrCat("--format: unknown format '", in.format,
                                                   "' (allowed: ", ExportFormatList(), ")"));
  }
  if (torchrun_wrap && !format->not_under_torchrun.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--format ", in.format, ": ", format->not_under_torchrun));
  }
  RETURN_IF_ERROR(CheckInput(in));

  FormatContext c{in, in.strategy};
  c.nproc_per_node = in.devices_per_node > 0 ? in.devices_per_node : std::min(in.world_size, 8);
  // min(world, 8) need not divide the world (12 ranks): then one node holds them all.
  if (in.world_size % c.nproc_per_node != 0) c.nproc_per_node = in.world_size;
  c.nnodes = in.world_size / c.nproc_per_node;

  FidelityBuilder rows(in.strategy);
  FormatOutput out = format->write(c, rows);
  ExportResult result;
  result.format = in.format;
  result.nnodes = c.nnodes;
  result.nproc_per_node = c.nproc_per_node;
  ASSIGN_OR_RETURN(result.fidelity, rows.Finish(in.format));
  result.architecture = std::move(out.architecture);
  if (result.rejected()) return result;  // no files, no command
  result.files = std::move(out.files);
  result.command =
      torchrun_wrap ? absl::StrCat(out.environment, TorchrunCommand(c, out.entry)) : out.command;
  return result;
}

}  // namespace autoaccel
