// The torchrun format alone: the launch of the layout's ranks around your
// own script, which applies every dimension itself. (torchrun:F launches
// format F's entry point instead; see Export.)
#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {

FormatOutput ExportTorchrun(const FormatContext& c, FidelityBuilder& rows) {
  FormatOutput out;
  out.entry = "train.py";
  out.command = TorchrunCommand(c, out.entry);
  out.files.emplace_back(
      "launch.sh",
      absl::StrCat("#!/bin/sh\n# ", c.nnodes, " node(s) x ", c.nproc_per_node,
                   " process(es); run on every node",
                   c.nnodes > 1 ? " with NODE_RANK and MASTER_ADDR set" : "",
                   ".\n# Strategy: ", StrategyToText(c.s), "\n", out.command, " \"$@\"\n"));
  const std::string yours = "torchrun only starts the ranks: your script applies it";
  ForEachRow(kStrategyFields, [&](const auto& field) { rows.NotExpressible(field.member, yours); });
  rows.Exact(
      &Strategy::data_parallel,
      absl::StrCat("the launch starts ", c.s.context_parallel > 1 ? "dp*cp*tp*pp" : "dp*tp*pp",
                   " = ", c.in.world_size, " ranks; how they split is your script's"));
  return out;
}

}  // namespace autoaccel
