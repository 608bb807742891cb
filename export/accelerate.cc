// The accelerate format: a config file for `accelerate launch
// --config_file accelerate_config.yaml` (accelerate 1.x keys).
#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

using OJson = nlohmann::ordered_json;

// YAML of a flat or one-level-nested map of scalars (what accelerate's
// config holds); strings are JSON-quoted, which YAML reads as strings.
void AppendYaml(const OJson& j, int indent, std::string* out) {
  for (const auto& [key, value] : j.items()) {
    absl::StrAppend(out, std::string(indent, ' '), key, ":");
    if (value.is_object()) {
      absl::StrAppend(out, "\n");
      AppendYaml(value, indent + 2, out);
    } else {
      absl::StrAppend(out, " ", value.dump(), "\n");
    }
  }
}

}  // namespace

FormatOutput ExportAccelerate(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  OJson cfg;
  cfg["compute_environment"] = "LOCAL_MACHINE";
  const bool deepspeed = s.sharding == Sharding::kZero1 || s.sharding == Sharding::kZero2 ||
                         (s.sharding == Sharding::kNone && s.offload == Offload::kCpu);
  const bool fsdp = s.sharding == Sharding::kFsdp;
  std::string distributed_type = "MULTI_GPU";
  if (deepspeed) {
    distributed_type = "DEEPSPEED";
  } else if (fsdp) {
    distributed_type = "FSDP";
  } else if (c.in.world_size == 1) {
    distributed_type = "NO";
  }
  cfg["distributed_type"] = distributed_type;
  cfg["num_machines"] = c.nnodes;
  cfg["num_processes"] = c.in.world_size;
  cfg["machine_rank"] = 0;
  if (c.nnodes > 1) {
    cfg["main_process_ip"] = "MASTER_ADDR";  // replace with node 0's address
    cfg["main_process_port"] = 29500;
  }
  cfg["rdzv_backend"] = "static";
  cfg["same_network"] = true;
  cfg["main_training_function"] = "main";
  cfg["use_cpu"] = false;

  rows.Exact(&Strategy::data_parallel);
  rows.NotExpressible(&Strategy::micro_batch_size,
                      "not in accelerate's config: the batch_size of your DataLoader");
  NoPipelineRows(s, rows, FidelityStatus::kRejected,
                 "accelerate has no pipeline parallelism for training (prepare_pippy is "
                 "inference only)");
  bool parallelism = false;  // a parallelism_config section
  if (s.tensor_parallel == 1) {
    rows.Exact(&Strategy::tensor_parallel);
  } else if (s.data_parallel > 1 && !fsdp) {
    rows.Rejected(&Strategy::tensor_parallel,
                  "accelerate refuses tensor parallelism with plain replicated data "
                  "parallelism (ParallelismConfig: dp_replicate_size > 1 with dp_shard_size 1); "
                  "use sharding fsdp (FSDP2 + TP)");
  } else if (deepspeed) {
    rows.Rejected(&Strategy::tensor_parallel,
                  "accelerate's parallelism_config tensor parallelism composes with FSDP2, not "
                  "with a DeepSpeed ZeRO optimizer; use sharding fsdp");
  } else {
    parallelism = true;
    rows.Approximated(&Strategy::tensor_parallel,
                      absl::StrCat("parallelism_config_tp_size ", s.tensor_parallel,
                                   ": the model's own tp_plan (load it with tp_plan=\"auto\"), "
                                   "which shards the layers its authors listed"));
  }
  // Context parallelism: torch's, under FSDP2 only (`accelerate launch`
  // refuses a parallelism_config without fsdp_version 2). FSDP2 shards over
  // dp_shard * cp, the data loader gives the cp ranks the same samples, and
  // maybe_context_parallel splits the buffers with torch's head-tail balancer.
  const bool cp = s.context_parallel > 1;
  bool cp_applied = false;
  std::string comm_strategy;  // parallelism_config_cp_comm_strategy, when cp_applied
  NoExpertParallelRows(s, rows,
                       "accelerate's ParallelismConfig has no expert-parallel size (dp_replicate, "
                       "dp_shard, tp and cp only)");
  if (!cp) {
    rows.Exact(&Strategy::context_parallel);
    rows.Exact(&Strategy::context_parallel_comm);
  } else if (!fsdp || (c.in.model && !c.in.model->IsCausal())) {
    rows.Rejected(&Strategy::context_parallel,
                  !fsdp ? "accelerate's context parallelism (parallelism_config_cp_size) runs "
                          "under FSDP2 only, and accelerate launch refuses a parallelism_config "
                          "without it; use sharding fsdp"
                        : "torch's context parallelism under accelerate runs causal attention "
                          "only (its hooks drop the mask for is_causal=True), and this model "
                          "attends both ways");
    rows.Rejected(&Strategy::context_parallel_comm,
                  "no context parallelism here (see context_parallel)");
  } else {
    parallelism = cp_applied = true;
    rows.Exact(&Strategy::context_parallel,
               absl::StrCat("parallelism_config_cp_size ", s.context_parallel,
                            ": run each step inside accelerator.maybe_context_parallel(buffers=["
                            "input_ids, shift_labels, position_ids], buffer_seq_dims=[1, 1, 1]), "
                            "which gives rank c sequence chunks c and 2*cp-1-c, and load the "
                            "model with attn_implementation=\"sdpa\""));
    comm_strategy = TorchCommStrategy(s, rows, [](const char* value) {
      return absl::StrCat("parallelism_config_cp_comm_strategy \"", value, "\"");
    });
  }
  if (parallelism) {
    cfg["parallelism_config"] = {
        {"parallelism_config_dp_replicate_size", 1},
        {"parallelism_config_dp_shard_size", s.data_parallel},
        {"parallelism_config_tp_size", s.tensor_parallel},
        {"parallelism_config_cp_size", cp_applied ? s.context_parallel : 1}};
    if (cp_applied) {
      cfg["parallelism_config"]["parallelism_config_cp_comm_strategy"] = comm_strategy;
    }
  }
  if (s.sequence_parallel) {
    rows.NotExpressible(&Strategy::sequence_parallel,
                        "accelerate's sp_size is DeepSpeed Ulysses, not Megatron's sequence "
                        "parallelism; use a tp_plan with sequence-parallel styles in code");
  } else {
    rows.Exact(&Strategy::sequence_parallel);
  }

  std::string mixed = "no";
  if (deepspeed) {
    // rows: sharding, precision, optimizer, offload
    OJson ds = DeepSpeedConfigJson(c, rows, DeepSpeedOptimizerSource::kScriptBuildsIt,
                                   "accelerator.prepare(model, optimizer, ...)");
    out.files.emplace_back("ds_config.json", JsonFile(ds));
    // With a config file, precision and batch sizes are DeepSpeed's:
    // `accelerate launch` refuses a mixed_precision key beside it, so
    // there is none.
    cfg["deepspeed_config"] = {{"deepspeed_config_file", FileRef(c, "ds_config.json")},
                               {"zero3_init_flag", false}};
    mixed.clear();
  } else {
    switch (s.precision) {
      case Precision::kFp32:
        rows.Exact(&Strategy::precision);
        break;
      case Precision::kBf16:
        mixed = "bf16";
        rows.Exact(&Strategy::precision, "mixed_precision bf16: fp32 weights, bf16 autocast");
        break;
      case Precision::kFp16:
        mixed = "fp16";
        rows.Exact(&Strategy::precision,
                   "mixed_precision fp16: autocast with torch.amp.GradScaler's defaults, the "
                   "same dynamic loss scaler as ours");
        break;
      case Precision::kPureBf16:
        mixed = "bf16";
        rows.Approximated(&Strategy::precision,
                          "mixed_precision bf16 over a model you load in bf16: no fp32 master "
                          "copy in the optimizer");
        break;
      case Precision::kFp8:
        mixed = "fp8";
        cfg["fp8_config"] = {{"backend", "AO"}};
        rows.Approximated(
            &Strategy::precision,
            "mixed_precision fp8 with fp8_config backend AO: torchao's tensorwise float8 linear "
            "layers (e4m3 inputs and weights, e5m2 gradients, per-tensor current scaling, as "
            "ours) over fp32 weights with bf16 autocast; accelerate leaves the model's first "
            "linear layer in bf16 too (ours only the LM head), and any linear layer whose "
            "sizes 16 does not divide (ours pads them)");
        break;
    }
    rows.NotExpressible(&Strategy::optimizer,
                        s.optimizer == Optimizer::kFusedAdamW
                            ? "created in your script: torch.optim.AdamW(params, fused=True)"
                            : "created in your script: torch.optim.AdamW(params, foreach=False)");
    if (fsdp) {
      OJson f;
      f["fsdp_version"] = 2;
      f["fsdp_reshard_after_forward"] = true;
      f["fsdp_auto_wrap_policy"] = "TRANSFORMER_BASED_WRAP";
      f["fsdp_state_dict_type"] = "SHARDED_STATE_DICT";
      f["fsdp_offload_params"] = s.offload == Offload::kCpu;
      f["fsdp_activation_checkpointing"] = s.checkpointing != Checkpointing::kNone;
      f["fsdp_cpu_ram_efficient_loading"] = true;
      cfg["fsdp_config"] = f;
      rows.Exact(&Strategy::sharding, "FSDP2, fsdp_reshard_after_forward true");
      if (s.offload == Offload::kCpu) {
        rows.Approximated(&Strategy::offload,
                          "fsdp_offload_params moves parameters and gradients to the host too, "
                          "not only the optimizer state");
      }
    } else {
      rows.Exact(&Strategy::sharding, distributed_type == "NO" ? "one process" : "DDP");
    }
    if (s.offload == Offload::kNone) rows.Exact(&Strategy::offload);
  }
  if (!mixed.empty()) cfg["mixed_precision"] = mixed;
  // accelerate's config file has no accumulation key outside DeepSpeed's.
  if (deepspeed) {
    rows.Exact(&Strategy::grad_accum_steps, "ds_config.json gradient_accumulation_steps");
  } else {
    rows.NotExpressible(&Strategy::grad_accum_steps,
                        absl::StrCat("not in accelerate's config: Accelerator("
                                     "gradient_accumulation_steps=",
                                     s.grad_accum_steps, ") in your script"));
  }

  if (s.checkpointing == Checkpointing::kNone) {
    rows.Exact(&Strategy::checkpointing);
    rows.Exact(&Strategy::checkpoint_percent);
  } else if (fsdp) {
    if (s.checkpointing == Checkpointing::kFull) {
      rows.Exact(&Strategy::checkpointing, "fsdp_activation_checkpointing: whole layers");
    } else {
      rows.Approximated(&Strategy::checkpointing,
                        "fsdp_activation_checkpointing recomputes whole layers, not only the "
                        "attention core");
    }
    AllLayersCheckpointRow(s, rows, "fsdp_activation_checkpointing");
  } else {
    rows.NotExpressible(&Strategy::checkpointing,
                        "no key outside FSDP: call model.gradient_checkpointing_enable() (whole "
                        "layers) in your script");
    rows.NotExpressible(&Strategy::checkpoint_percent, "decided in your script");
  }
  AttentionAtLoadRow(s, rows, "accelerate");
  if (cp_applied && s.attention != Attention::kSdpa) {
    rows.NotExpressible(&Strategy::attention,
                        "torch's context parallelism replaces F.scaled_dot_product_attention "
                        "(its flash, memory-efficient and cuDNN kernels) and no other attention: "
                        "load the model with attn_implementation=\"sdpa\", the same attention "
                        "fused");
  }

  const std::string config_file = FileRef(c, "accelerate_config.yaml");
  std::string yaml = absl::StrCat("# accelerate launch --config_file ", config_file, " train.py\n");
  AppendYaml(cfg, 0, &yaml);
  out.files.insert(out.files.begin(), {"accelerate_config.yaml", yaml});
  out.entry = "train.py";
  out.command = absl::StrCat("accelerate launch --config_file ", config_file,
                             c.nnodes > 1 ? " --machine_rank=$NODE_RANK" : "", " train.py");
  return out;
}

}  // namespace autoaccel
