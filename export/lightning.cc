// The lightning format: Lightning Trainer and strategy arguments as JSON,
// laid out as LightningCLI reads them (trainer.strategy with class_path and
// init_args; JSON is YAML to it).
#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {

FormatOutput ExportLightning(const FormatContext& c, FidelityBuilder& rows) {
  using OJson = nlohmann::ordered_json;
  const Strategy& s = c.s;
  FormatOutput out;
  OJson trainer;
  trainer["accelerator"] = "gpu";
  trainer["devices"] = c.nproc_per_node;
  trainer["num_nodes"] = c.nnodes;
  trainer["accumulate_grad_batches"] = s.grad_accum_steps;
  rows.Exact(&Strategy::grad_accum_steps, "accumulate_grad_batches");
  rows.Exact(&Strategy::micro_batch_size,
             "your DataLoader's batch_size (data.batch_size for LightningCLI)");
  rows.Exact(&Strategy::data_parallel);
  NoPipelineRows(s, rows, FidelityStatus::kRejected, "Lightning has no pipeline-parallel strategy");
  NoExpertParallelRows(
      s, rows,
      "Lightning has no expert parallelism: ModelParallelStrategy's device mesh has "
      "data- and tensor-parallel dimensions only");
  NoContextParallelRows(
      s, rows,
      "Lightning has no context parallelism: ModelParallelStrategy's device mesh has "
      "data- and tensor-parallel dimensions only");

  const bool deepspeed = s.sharding == Sharding::kZero1 || s.sharding == Sharding::kZero2 ||
                         (s.sharding == Sharding::kNone && s.offload == Offload::kCpu);
  OJson strategy;
  if (s.tensor_parallel > 1) {
    strategy = {
        {"class_path", "lightning.pytorch.strategies.ModelParallelStrategy"},
        {"init_args",
         {{"data_parallel_size", s.data_parallel}, {"tensor_parallel_size", s.tensor_parallel}}}};
    rows.NotExpressible(&Strategy::tensor_parallel,
                        "ModelParallelStrategy builds the device mesh; apply parallelize_module "
                        "over self.device_mesh[\"tensor_parallel\"] in configure_model");
    if (deepspeed) {
      rows.Rejected(&Strategy::sharding,
                    "ModelParallelStrategy has no ZeRO-1/2 and DeepSpeedStrategy no tensor "
                    "parallelism; use sharding none or fsdp");
    } else {
      rows.NotExpressible(&Strategy::sharding,
                          s.sharding == Sharding::kFsdp
                              ? "apply fully_shard over self.device_mesh[\"data_parallel\"] in "
                                "configure_model"
                              : "leave the data-parallel mesh dimension replicated in "
                                "configure_model");
    }
  } else {
    rows.Exact(&Strategy::tensor_parallel);
    if (deepspeed) {
      OJson init = {{"stage", s.sharding == Sharding::kZero2 ? 2 : 1},
                    {"offload_optimizer", s.offload == Offload::kCpu}};
      if (s.precision == Precision::kFp16) {
        init["loss_scale"] = 0;
        init["initial_scale_power"] = 16;
        init["loss_scale_window"] = 2000;
        init["hysteresis"] = 1;
        init["min_loss_scale"] = 1;
      }
      strategy = {{"class_path", "lightning.pytorch.strategies.DeepSpeedStrategy"},
                  {"init_args", init}};
      if (s.sharding == Sharding::kNone) {
        if (s.data_parallel > 1) {
          rows.Rejected(&Strategy::offload,
                        "DeepSpeed offloads optimizer state only under ZeRO, which shards it "
                        "over the data-parallel ranks; use sharding zero1/zero2/fsdp");
        }
        rows.Exact(&Strategy::sharding,
                   "DeepSpeedStrategy stage 1 over one rank shards nothing (it is there for the "
                   "offload)");
      } else {
        rows.Exact(&Strategy::sharding, "DeepSpeedStrategy stage");
      }
    } else if (s.sharding == Sharding::kFsdp) {
      strategy = {
          {"class_path", "lightning.pytorch.strategies.FSDPStrategy"},
          {"init_args",
           {{"sharding_strategy", "FULL_SHARD"}, {"cpu_offload", s.offload == Offload::kCpu}}}};
      rows.Exact(&Strategy::sharding, "FSDPStrategy FULL_SHARD");
    } else {
      strategy = c.in.world_size == 1 ? "auto" : "ddp";
      rows.Exact(&Strategy::sharding, "DDP");
    }
  }
  trainer["strategy"] = strategy;
  if (s.sequence_parallel) {
    rows.NotExpressible(&Strategy::sequence_parallel,
                        "use SequenceParallel styles in your parallelize_module plan");
  } else {
    rows.Exact(&Strategy::sequence_parallel);
  }

  const bool ds = strategy.is_object() &&
                  strategy["class_path"] == "lightning.pytorch.strategies.DeepSpeedStrategy";
  switch (s.precision) {
    case Precision::kFp32:
      trainer["precision"] = "32-true";
      rows.Exact(&Strategy::precision);
      break;
    case Precision::kBf16:
      trainer["precision"] = "bf16-mixed";
      if (ds) {
        rows.Approximated(&Strategy::precision,
                          "under DeepSpeedStrategy bf16-mixed is DeepSpeed's bf16: bf16 weights "
                          "with fp32 masters, not autocast over fp32 weights");
      } else {
        rows.Exact(&Strategy::precision, "bf16-mixed: fp32 weights, bf16 autocast");
      }
      break;
    case Precision::kPureBf16:
      if (ds) {
        trainer["precision"] = "bf16-mixed";
        rows.Exact(&Strategy::precision,
                   "bf16-mixed under DeepSpeedStrategy: bf16 weights, fp32 masters");
      } else {
        trainer["precision"] = "bf16-true";
        rows.Approximated(&Strategy::precision,
                          "bf16-true: bf16 weights with no fp32 master copy in the optimizer");
      }
      break;
    case Precision::kFp8:
      rows.Rejected(&Strategy::precision,
                    "Lightning's fp8 is its transformer-engine precision plugin, whose recipe "
                    "scales by an amax history (delayed scaling), not by each tensor's current "
                    "maximum; train fp8 through the megatron, torchtitan or accelerate export");
      break;
    case Precision::kFp16:
      trainer["precision"] = "16-mixed";
      if (ds) {
        rows.Approximated(&Strategy::precision,
                          "DeepSpeed fp16 keeps fp16 weights with fp32 masters; the loss scaler "
                          "arguments match ours (start 2^16, window 2000, hysteresis 1) but for "
                          "its floor of 1");
      } else {
        rows.Exact(&Strategy::precision,
                   "16-mixed: fp16 autocast with torch.amp.GradScaler's defaults, as ours");
      }
      break;
  }
  if (s.offload == Offload::kNone) {
    rows.Exact(&Strategy::offload);
  } else if (ds) {
    if (s.sharding != Sharding::kNone || s.data_parallel == 1) {
      rows.Exact(&Strategy::offload, "offload_optimizer");
    }
  } else if (s.sharding == Sharding::kFsdp && s.tensor_parallel == 1) {
    rows.Approximated(&Strategy::offload,
                      "FSDPStrategy cpu_offload moves parameters and gradients to the host too");
  } else {
    rows.NotExpressible(&Strategy::offload,
                        "ModelParallelStrategy has no offload setting: use "
                        "fully_shard(offload_policy=CPUOffloadPolicy()) in configure_model");
  }
  if (s.checkpointing == Checkpointing::kNone) {
    rows.Exact(&Strategy::checkpointing);
    rows.Exact(&Strategy::checkpoint_percent);
  } else {
    rows.NotExpressible(&Strategy::checkpointing,
                        "no Trainer argument: call model.gradient_checkpointing_enable() in "
                        "configure_model, or FSDPStrategy(activation_checkpointing_policy="
                        "{YourBlock}) in code (whole layers)");
    rows.NotExpressible(&Strategy::checkpoint_percent, "decided in your code");
  }
  AttentionAtLoadRow(s, rows, "Lightning");
  rows.NotExpressible(&Strategy::optimizer,
                      s.optimizer == Optimizer::kFusedAdamW
                          ? "configure_optimizers: torch.optim.AdamW(params, fused=True)"
                          : "configure_optimizers: torch.optim.AdamW(params, foreach=False)");

  OJson doc;
  doc["trainer"] = trainer;
  doc["data"] = {{"batch_size", s.micro_batch_size}};
  out.files.emplace_back("lightning.json", JsonFile(doc));
  // LightningCLI runs a subcommand; its config holds trainer, model and data.
  out.entry = absl::StrCat("train.py fit --config ", FileRef(c, "lightning.json"));
  // Lightning starts the node's processes itself (one command per node).
  out.command = absl::StrCat(
      c.nnodes > 1 ? "NODE_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR python " : "python ",
      out.entry);
  return out;
}

}  // namespace autoaccel
