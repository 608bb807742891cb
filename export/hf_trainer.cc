// The hf-trainer format: Hugging Face TrainingArguments as command-line
// flags (transformers 5: --activation_checkpointing, --fsdp with an
// fsdp_config.json, or --deepspeed ds_config.json), and the keyword
// arguments to pass to from_pretrained.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

using OJson = nlohmann::ordered_json;

}  // namespace

FormatOutput ExportHfTrainer(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  // One argument per line, none with a space, so `$(cat training_args.txt)` keeps them whole.
  std::vector<std::string> args = {
      absl::StrCat("--per_device_train_batch_size=", s.micro_batch_size),
      absl::StrCat("--gradient_accumulation_steps=", s.grad_accum_steps)};
  OJson model_kwargs;
  model_kwargs["attn_implementation"] = s.attention == Attention::kSdpa ? "sdpa" : "eager";

  const bool deepspeed = s.sharding == Sharding::kZero1 || s.sharding == Sharding::kZero2 ||
                         (s.sharding == Sharding::kNone && s.offload == Offload::kCpu);
  const bool fsdp = s.sharding == Sharding::kFsdp;

  rows.Exact(&Strategy::data_parallel);
  if (s.tensor_parallel == 1) {
    rows.Exact(&Strategy::tensor_parallel);
  } else if (s.sharding == Sharding::kNone && s.data_parallel > 1) {
    rows.Rejected(&Strategy::tensor_parallel,
                  "accelerate (under the Trainer) refuses tensor parallelism with plain "
                  "replicated data parallelism (dp_replicate > 1, dp_shard 1); use sharding fsdp");
  } else if (deepspeed) {
    rows.Rejected(&Strategy::tensor_parallel,
                  "the Trainer checks DeepSpeed's train_batch_size against every rank as "
                  "data-parallel, so DeepSpeed AutoTP cannot go through it; use the deepspeed "
                  "format with your own loop, or sharding fsdp");
  } else {
    rows.NotExpressible(&Strategy::tensor_parallel,
                        absl::StrCat("no flag: in code, load the model with tp_plan=\"auto\" and "
                                     "pass TrainingArguments(parallelism_config="
                                     "ParallelismConfig(tp_size=",
                                     s.tensor_parallel, ", dp_shard_size=", s.data_parallel, "))"));
  }
  NoPipelineRows(s, rows, FidelityStatus::kRejected, "the Trainer has no pipeline parallelism");
  // Context parallelism: accelerate's (torch's), which the Trainer runs under
  // FSDP2 (it shards input_ids, labels, shift_labels and position_ids with
  // maybe_context_parallel). The Accelerator it builds reads the
  // ParallelismConfig from the environment `accelerate launch` would set.
  const bool cp = s.context_parallel > 1;
  std::string cp_refused;  // why the Trainer cannot, if it cannot
  if (cp && s.tensor_parallel > 1) {
    cp_refused =
        "the Trainer builds the ParallelismConfig of a tp_plan model from its DistributedConfig, "
        "which has no context-parallel size; use tensor_parallel 1";
  } else if (cp && deepspeed) {
    cp_refused =
        "the Trainer checks DeepSpeed's train_batch_size against every rank as data-parallel, "
        "so context-parallel ranks cannot go through it; use sharding fsdp";
  } else if (cp && !fsdp) {
    cp_refused =
        "the Trainer's context parallelism (accelerate's cp_size) runs under FSDP2 only, which "
        "plain DDP is not; use sharding fsdp";
  } else if (cp && c.in.model && !c.in.model->IsCausal()) {
    cp_refused =
        "torch's context parallelism under accelerate runs causal attention only (its hooks "
        "drop the mask for is_causal=True), and this model attends both ways";
  }
  NoExpertParallelRows(s, rows,
                       "the Trainer launches through accelerate, whose ParallelismConfig has no "
                       "expert-parallel size");
  if (!cp) {
    rows.Exact(&Strategy::context_parallel);
    rows.Exact(&Strategy::context_parallel_comm);
  } else if (!cp_refused.empty()) {
    rows.Rejected(&Strategy::context_parallel, cp_refused);
    rows.Rejected(&Strategy::context_parallel_comm,
                  "no context parallelism here (see context_parallel)");
  } else {
    const std::string comm = TorchCommStrategy(s, rows, [](const char* value) {
      return absl::StrCat("PARALLELISM_CONFIG_CP_COMM_STRATEGY=", value);
    });
    out.environment = absl::StrCat(
        "ACCELERATE_USE_PARALLELISM_CONFIG=true PARALLELISM_CONFIG_DP_SHARD_SIZE=", s.data_parallel,
        " PARALLELISM_CONFIG_CP_SIZE=", s.context_parallel,
        " PARALLELISM_CONFIG_CP_COMM_STRATEGY=", comm, " ");
    model_kwargs["attn_implementation"] = "sdpa";  // the Trainer refuses another under cp
    rows.Exact(&Strategy::context_parallel,
               "PARALLELISM_CONFIG_CP_SIZE (with ACCELERATE_USE_PARALLELISM_CONFIG=true and "
               "PARALLELISM_CONFIG_DP_SHARD_SIZE in the environment; the command sets them): "
               "the Trainer splits each sequence with torch's head-tail balancer, rank c "
               "holding chunks c and 2*cp-1-c, and FSDP2 shards over dp x cp");
  }
  if (s.sequence_parallel) {
    rows.NotExpressible(&Strategy::sequence_parallel,
                        "no flag: a tp_plan with sequence-parallel styles in code");
  } else {
    rows.Exact(&Strategy::sequence_parallel);
  }
  rows.Exact(&Strategy::micro_batch_size, "--per_device_train_batch_size");
  rows.Exact(&Strategy::grad_accum_steps, "--gradient_accumulation_steps");

  OJson fsdp_config;
  if (deepspeed) {
    // rows: sharding, precision, optimizer, offload
    OJson ds = DeepSpeedConfigJson(c, rows, DeepSpeedOptimizerSource::kTrainerFillsAuto);
    // The Trainer matches these against its own flags.
    if (ds.contains("bf16")) args.push_back("--bf16");
    if (ds.contains("fp16")) args.push_back("--fp16");
    args.push_back(absl::StrCat("--deepspeed=", FileRef(c, "ds_config.json")));
    out.files.emplace_back("ds_config.json", JsonFile(ds));
  } else {
    if (fsdp) {
      fsdp_config["version"] = 2;
      fsdp_config["reshard_after_forward"] = true;
      args.push_back("--fsdp");
      args.push_back(absl::StrCat("--fsdp_config=", FileRef(c, "fsdp_config.json")));
      rows.Exact(&Strategy::sharding,
                 "--fsdp with fsdp_config version 2 (FSDP2), reshard_after_forward true");
    } else {
      rows.Exact(&Strategy::sharding, "DistributedDataParallel");
    }
    switch (s.precision) {
      case Precision::kFp32:
        rows.Exact(&Strategy::precision);
        break;
      case Precision::kBf16:
        args.push_back("--bf16");
        rows.Exact(&Strategy::precision, "--bf16: fp32 weights, bf16 autocast");
        break;
      case Precision::kFp16:
        args.push_back("--fp16");
        rows.Exact(&Strategy::precision,
                   "--fp16: fp16 autocast with torch.amp.GradScaler's defaults, the same "
                   "dynamic loss scaler as ours");
        break;
      case Precision::kPureBf16:
        args.push_back("--bf16");
        model_kwargs["dtype"] = "bfloat16";
        rows.Approximated(&Strategy::precision,
                          "from_pretrained(dtype=torch.bfloat16) and --bf16: bf16 weights, but "
                          "the optimizer updates them directly, with no fp32 master copy");
        break;
      case Precision::kFp8:
        rows.Rejected(&Strategy::precision,
                      "TrainingArguments has no fp8 option; train fp8 through the accelerate "
                      "export (mixed_precision fp8 with torchao)");
        break;
    }
    if (s.optimizer == Optimizer::kFusedAdamW) {
      args.push_back("--optim=adamw_torch_fused");
      rows.Exact(&Strategy::optimizer, "--optim adamw_torch_fused");
    } else {
      args.push_back("--optim=adamw_torch");
      rows.Approximated(&Strategy::optimizer,
                        "--optim adamw_torch: torch.optim.AdamW's default (foreach, "
                        "multi-tensor on CUDA), not one parameter at a time");
    }
    if (s.offload == Offload::kNone) {
      rows.Exact(&Strategy::offload);
    } else {  // fsdp (sharding none with offload went to DeepSpeed)
      fsdp_config["cpu_offload"] = true;
      rows.Approximated(&Strategy::offload,
                        "fsdp_config cpu_offload moves parameters and gradients to the host "
                        "too, not only the optimizer state");
    }
  }

  // Activation checkpointing: FSDP's own under --fsdp (the Trainer's flag would
  // gather twice), else --activation_checkpointing.
  if (s.checkpointing == Checkpointing::kNone) {
    rows.Exact(&Strategy::checkpointing);
    rows.Exact(&Strategy::checkpoint_percent);
  } else {
    const std::string where =
        fsdp ? "fsdp_config activation_checkpointing" : "--activation_checkpointing";
    if (fsdp) {
      fsdp_config["activation_checkpointing"] = true;
    } else {
      args.push_back("--activation_checkpointing");
    }
    if (s.checkpointing == Checkpointing::kFull) {
      rows.Exact(&Strategy::checkpointing, absl::StrCat(where, ": whole decoder layers"));
    } else {
      rows.Approximated(&Strategy::checkpointing,
                        absl::StrCat(where,
                                     " recomputes whole decoder layers; there is no "
                                     "selective (attention core only) setting"));
    }
    if (s.checkpoint_percent == 100) {
      rows.Exact(&Strategy::checkpoint_percent);
    } else if (fsdp) {
      AllLayersCheckpointRow(s, rows, where);
    } else {
      const int every = std::max(1, static_cast<int>(std::lround(100.0 / s.checkpoint_percent)));
      args.push_back(
          absl::StrCat("--activation_checkpointing_kwargs={\"every_n_layers\":", every, "}"));
      rows.Approximated(
          &Strategy::checkpoint_percent,
          absl::StrCat("every_n_layers ", every, ": one layer in ", every, " (about ", 100 / every,
                       "% of them, spread over the model) rather than "
                       "the first ",
                       s.checkpoint_percent, "%"));
    }
  }
  if (cp && cp_refused.empty() && s.attention != Attention::kSdpa) {
    rows.Approximated(&Strategy::attention,
                      "from_pretrained(attn_implementation=\"sdpa\"): the Trainer's context "
                      "parallelism runs SDPA only (torch's flash, memory-efficient or cuDNN "
                      "kernels), the same attention fused");
  } else {
    rows.Exact(&Strategy::attention,
               absl::StrCat("from_pretrained(attn_implementation=\"",
                            model_kwargs["attn_implementation"].get<std::string>(), "\")"));
  }

  if (fsdp) out.files.emplace_back("fsdp_config.json", JsonFile(fsdp_config));
  out.files.insert(out.files.begin(),
                   {"training_args.txt", absl::StrCat(absl::StrJoin(args, "\n"), "\n")});
  out.files.emplace_back("from_pretrained_kwargs.json", JsonFile(model_kwargs));
  out.entry = absl::StrCat("train.py $(cat ", FileRef(c, "training_args.txt"), ")");
  out.command = absl::StrCat(out.environment, TorchrunCommand(c, out.entry));
  return out;
}

}  // namespace autoaccel
