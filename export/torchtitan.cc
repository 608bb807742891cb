// The torchtitan format. torchtitan 0.3.0 (PyPI) configures a job with a
// Python config function returning Trainer.Config (its TOML job files were
// replaced by config_registry functions in 2026); this writes one, to run
// with `-m torchtitan.train --module autoaccel_torchtitan --config
// autoaccel_config`.
#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

const char* PyBool(bool b) { return b ? "True" : "False"; }

// torchtitan's model module and base config function for our family.
std::pair<std::string, std::string> BaseConfig(const ExportInput& in) {
  if (in.model && (in.model->family == "qwen3")) return {"qwen3", "qwen3_0_6b"};
  return {"llama3", "llama3_8b"};
}

}  // namespace

FormatOutput ExportTorchtitan(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  const auto [module, base] = BaseConfig(c.in);
  std::string py =
      absl::StrCat("# torchtitan job config for autoaccel's strategy\n#   ", StrategyToText(s),
                   "\n# Format: torchtitan 0.3.0, a config function (not a TOML file). Run:\n#   ",
                   "PYTHONPATH=", c.in.file_dir.empty() ? "." : c.in.file_dir,
                   " torchrun ... -m torchtitan.train --module autoaccel_torchtitan "
                   "--config autoaccel_config\n"
                   "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n"
                   "from torchtitan.models.",
                   module, ".config_registry import ", base,
                   " as base_config  # the base closest to your model: edit\n\n\n"
                   "def autoaccel_config():\n"
                   "    config = base_config()\n");
  auto set = [&py](absl::string_view key, const std::string& value) {
    absl::StrAppend(&py, "    config.", key, " = ", value, "\n");
  };
  set("training.seq_len", absl::StrCat(c.in.seq_len));
  set("training.global_batch_size", absl::StrCat(c.in.global_batch_size));

  // Data parallelism: replicate (DDP) or shard (FSDP2).
  const bool fsdp = s.sharding == Sharding::kFsdp;
  set("parallelism.data_parallel_replicate_degree", absl::StrCat(fsdp ? 1 : s.data_parallel));
  set("parallelism.data_parallel_shard_degree", absl::StrCat(fsdp ? s.data_parallel : 1));
  rows.Exact(&Strategy::data_parallel,
             fsdp ? "data_parallel_shard_degree" : "data_parallel_replicate_degree");
  switch (s.sharding) {
    case Sharding::kNone:
      rows.Exact(&Strategy::sharding, "replicated (DDP)");
      break;
    case Sharding::kZero1:
      rows.Rejected(&Strategy::sharding,
                    "torchtitan has no ZeRO-1: data parallelism is replicated (DDP) or FSDP2, "
                    "which shards parameters too; use sharding none or fsdp");
      break;
    case Sharding::kZero2:
      rows.Rejected(&Strategy::sharding,
                    "torchtitan has no ZeRO-2: FSDP2 always shards parameters between steps; "
                    "use sharding fsdp (fsdp_reshard_after_forward \"never\" comes closest)");
      break;
    case Sharding::kFsdp:
      set("parallelism.fsdp_reshard_after_forward", "\"always\"");
      rows.Exact(&Strategy::sharding, "FSDP2 (data_parallel_shard_degree), reshard after forward");
      break;
  }
  set("parallelism.tensor_parallel_degree", absl::StrCat(s.tensor_parallel));
  set("parallelism.enable_sequence_parallel", PyBool(s.sequence_parallel));
  rows.Exact(&Strategy::tensor_parallel, "tensor_parallel_degree");
  rows.Exact(&Strategy::sequence_parallel, "enable_sequence_parallel");

  set("parallelism.pipeline_parallel_degree", absl::StrCat(s.pipeline_parallel));
  rows.Exact(&Strategy::pipeline_parallel, "pipeline_parallel_degree");
  if (s.pipeline_parallel == 1) {
    set("training.local_batch_size", absl::StrCat(s.micro_batch_size));
    rows.Exact(&Strategy::pipeline_schedule, "no pipeline");
    rows.Exact(&Strategy::virtual_stages, "no pipeline");
    rows.Exact(&Strategy::micro_batch_size, "training.local_batch_size");
    rows.Exact(&Strategy::grad_accum_steps,
               "global_batch_size / (local_batch_size * data parallel) accumulation steps");
  } else {
    // A step's micro-batches all go through the pipeline.
    set("training.local_batch_size", absl::StrCat(s.micro_batch_size * s.grad_accum_steps));
    set("parallelism.pipeline_parallel_microbatch_size", absl::StrCat(s.micro_batch_size));
    rows.Exact(&Strategy::micro_batch_size, "pipeline_parallel_microbatch_size");
    rows.Exact(&Strategy::grad_accum_steps,
               "local_batch_size / pipeline_parallel_microbatch_size pipeline micro-batches");
    if (s.pipeline_schedule == PipelineSchedule::k1F1B) {
      set("parallelism.pipeline_parallel_schedule", "\"1F1B\"");
      rows.Exact(&Strategy::pipeline_schedule, "pipeline_parallel_schedule \"1F1B\"");
      rows.Exact(&Strategy::virtual_stages);
    } else {
      set("parallelism.pipeline_parallel_schedule", "\"Interleaved1F1B\"");
      rows.Exact(&Strategy::pipeline_schedule, "pipeline_parallel_schedule \"Interleaved1F1B\"");
      const int chunks = s.pipeline_parallel * s.virtual_stages;
      if (c.in.model && c.in.model->n_layer % chunks == 0) {
        set("parallelism.pipeline_parallel_layers_per_stage",
            absl::StrCat(c.in.model->n_layer / chunks));
        rows.Exact(&Strategy::virtual_stages,
                   "pipeline_parallel_layers_per_stage = layers / (pp * virtual stages)");
      } else {
        rows.Approximated(&Strategy::virtual_stages,
                          "torchtitan derives the stages per rank from "
                          "pipeline_parallel_layers_per_stage; set it to layers / (pp * virtual "
                          "stages) (give --model to have it written)");
      }
    }
  }

  switch (s.precision) {
    case Precision::kFp32:
      set("training.mixed_precision_param", "\"float32\"");
      rows.Exact(&Strategy::precision, "mixed_precision_param float32");
      break;
    case Precision::kBf16:
      set("training.mixed_precision_param", "\"bfloat16\"");
      if (fsdp) {
        rows.Approximated(&Strategy::precision,
                          "FSDP2 mixed precision: computes with bf16 copies of the fp32 "
                          "parameters (reductions in fp32) rather than autocasting op by op");
      } else if (s.tensor_parallel > 1 || s.pipeline_parallel > 1) {
        rows.NotExpressible(&Strategy::precision,
                            "torchtitan applies mixed precision through FSDP, or autocast only "
                            "under pure DDP / one device; with tensor or pipeline parallelism "
                            "and no FSDP it trains in fp32");
      } else {
        rows.Exact(&Strategy::precision, "mixed_precision_param bfloat16 (torch.autocast)");
      }
      break;
    case Precision::kPureBf16:
      set("training.dtype", "\"bfloat16\"");
      rows.Approximated(&Strategy::precision,
                        "training.dtype bfloat16: bf16 parameters, gradients and optimizer state "
                        "with no fp32 master copy");
      break;
    case Precision::kFp16:
      rows.Rejected(&Strategy::precision,
                    "torchtitan trains in bfloat16 or float32 only: no fp16 with loss scaling");
      break;
  }
  switch (s.checkpointing) {
    case Checkpointing::kNone:
      set("activation_checkpoint", "None");
      rows.Exact(&Strategy::checkpointing);
      break;
    case Checkpointing::kFull:
      set("activation_checkpoint", "FullAC.Config()");
      rows.Exact(&Strategy::checkpointing, "FullAC: whole transformer blocks");
      break;
    case Checkpointing::kSelective:
      set("activation_checkpoint", "SelectiveAC.Config()");
      rows.Approximated(&Strategy::checkpointing,
                        "SelectiveAC is per-op: it saves matmul and attention outputs and "
                        "recomputes the rest, not the attention core alone");
      break;
  }
  AllLayersCheckpointRow(s, rows, "activation_checkpoint");
  rows.Approximated(&Strategy::attention,
                    s.attention == Attention::kSdpa
                        ? "torchtitan's language models use their config's fused backend (flex "
                          "or varlen attention), not torch SDPA"
                        : "torchtitan has no spelled-out attention: its models use a fused "
                          "backend (flex or varlen)");
  absl::StrAppend(&py, "    for group in config.optimizer.param_groups:\n",
                  s.optimizer == Optimizer::kFusedAdamW
                      ? "        group.optimizer_kwargs[\"fused\"] = True\n"
                      : "        group.optimizer_kwargs[\"foreach\"] = False\n");
  rows.Exact(&Strategy::optimizer, s.optimizer == Optimizer::kFusedAdamW
                                       ? "AdamW with fused=True"
                                       : "AdamW with foreach=False (one parameter at a time)");
  if (s.offload == Offload::kCpu) {
    set("training.enable_cpu_offload", "True");
    if (fsdp) {
      rows.Approximated(&Strategy::offload,
                        "enable_cpu_offload (FSDP2 CPUOffloadPolicy) keeps parameters and "
                        "gradients on the host too and steps there");
    } else {
      rows.Rejected(&Strategy::offload, "torchtitan offloads to the host only under FSDP");
    }
  } else {
    rows.Exact(&Strategy::offload);
  }
  absl::StrAppend(&py, "    return config\n");
  out.files.emplace_back("autoaccel_torchtitan.py", py);
  out.entry = "-m torchtitan.train --module autoaccel_torchtitan --config autoaccel_config";
  out.command = absl::StrCat("PYTHONPATH=", c.in.file_dir.empty() ? "." : c.in.file_dir, " ",
                             TorchrunCommand(c, out.entry));
  return out;
}

}  // namespace autoaccel
