// The torch format: strategy.json for autoaccel.torch.apply() (the Python
// package's python/autoaccel/torch.py), which applies the strategy to the
// user's own nn.Module, and the torchrun launch around their script. The
// rows say what apply() does with each value, as its docstring states it.
#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {

FormatOutput ExportTorch(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  out.files.emplace_back("strategy.json", JsonFile(StrategyToJson(s)));
  out.entry = "train.py";
  out.command = TorchrunCommand(c, out.entry);

  rows.Exact(&Strategy::data_parallel, "the ranks torchrun starts, over one process group");
  if (s.tensor_parallel == 1) {
    rows.Exact(&Strategy::tensor_parallel);
  } else if (s.data_parallel > 1 &&
             (s.sharding == Sharding::kNone || s.sharding == Sharding::kZero1)) {
    rows.Rejected(&Strategy::tensor_parallel,
                  "apply() composes tensor parallelism with data parallelism only through FSDP2 "
                  "over the dp mesh dimension: use sharding zero2 or fsdp");
  } else {
    rows.Exact(&Strategy::tensor_parallel,
               "DTensor parallelize_module over a (dp, tp) mesh with the tensor-parallel plan "
               "the Hugging Face model declares; apply() refuses a model without one");
  }
  NoPipelineRows(s, rows, FidelityStatus::kRejected, "apply() has no pipeline parallelism");
  if (s.sequence_parallel) {
    rows.Rejected(&Strategy::sequence_parallel, "apply() has no sequence parallelism");
  } else {
    rows.Exact(&Strategy::sequence_parallel);
  }
  NoExpertParallelRows(s, rows,
                       "apply() has no expert parallelism: it does not spread experts over ranks");
  NoContextParallelRows(
      s, rows, "apply() has no context parallelism: it does not split sequences over ranks");
  switch (s.sharding) {
    case Sharding::kNone:
      rows.Exact(&Strategy::sharding, s.data_parallel > 1 ? "DistributedDataParallel" : "");
      break;
    case Sharding::kZero1:
      rows.Exact(&Strategy::sharding,
                 "DistributedDataParallel with ZeroRedundancyOptimizer: each rank keeps the "
                 "optimizer state of its share of the parameters");
      break;
    case Sharding::kZero2:
      rows.Approximated(&Strategy::sharding,
                        "FSDP2 fully_shard per block with reshard_after_forward=False: "
                        "gradients and optimizer state sharded as ZeRO-2, and the parameters "
                        "too between steps (gathered once per micro-batch)");
      break;
    case Sharding::kFsdp:
      rows.Exact(&Strategy::sharding, "FSDP2 fully_shard per block, reshard_after_forward=True");
      break;
  }
  rows.Exact(&Strategy::micro_batch_size,
             "step(batch) splits this rank's batch into micro-batches of this size");
  rows.Exact(&Strategy::grad_accum_steps,
             "step(batch) runs this many micro-batches per optimizer step, gradients "
             "synchronised on the last");
  switch (s.precision) {
    case Precision::kFp32:
      rows.Exact(&Strategy::precision);
      break;
    case Precision::kBf16:
      rows.Exact(&Strategy::precision, "torch.autocast(bfloat16) over fp32 weights");
      break;
    case Precision::kFp16:
      rows.Exact(&Strategy::precision, "torch.autocast(float16) with a GradScaler");
      break;
    case Precision::kPureBf16:
      rows.Exact(&Strategy::precision,
                 "bf16 weights; the optimizer steps fp32 master copies, copied back each step");
      break;
    case Precision::kFp8:
      rows.Rejected(&Strategy::precision,
                    "autoaccel.torch.apply has no fp8 linear layers; train fp8 through the "
                    "megatron, torchtitan or accelerate export");
      break;
  }
  if (s.checkpointing == Checkpointing::kNone) {
    rows.Exact(&Strategy::checkpointing);
    rows.Exact(&Strategy::checkpoint_percent);
  } else {
    rows.Exact(&Strategy::checkpointing,
               s.checkpointing == Checkpointing::kFull
                   ? "torch.utils.checkpoint around each chosen block"
                   : "the attention core recomputed (Hugging Face models; apply() refuses "
                     "selective on others)");
    rows.Exact(&Strategy::checkpoint_percent, "the first ceil(blocks x percent / 100) blocks");
  }
  rows.Exact(
      &Strategy::attention,
      absl::StrCat("attn_implementation \"", s.attention == Attention::kSdpa ? "sdpa" : "eager",
                   "\" on a Hugging Face model (set_attention= for others)"));
  rows.Exact(&Strategy::optimizer, s.optimizer == Optimizer::kFusedAdamW
                                       ? "optimizer_fn(params, fused=True)"
                                       : "optimizer_fn(params, fused=False); "
                                         "AdamW(..., foreach=False) steps one parameter at "
                                         "a time (a dict of AdamW arguments does that)");
  if (s.offload == Offload::kNone) {
    rows.Exact(&Strategy::offload);
  } else if (s.sharding == Sharding::kZero1 && s.data_parallel > 1) {
    rows.Rejected(&Strategy::offload,
                  "apply() refuses offload cpu with zero1 on GPUs: ZeroRedundancyOptimizer "
                  "broadcasts the host copies over the GPU process group; use zero2 or fsdp");
  } else {
    rows.Exact(&Strategy::offload,
               "fp32 master copies and optimizer state in host memory, stepped there");
  }
  return out;
}

}  // namespace autoaccel
