// The deepspeed format: ds_config.json for deepspeed.initialize().
#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

using OJson = nlohmann::ordered_json;

// Our fp16 loss scaler (engine/optim.h, torch.amp.GradScaler's defaults):
// start at 2^16, halve and skip the step on an overflow, double after 2000
// clean steps in a row.
constexpr int kInitialScalePower = 16;
constexpr int kScaleWindow = 2000;

}  // namespace

OJson DeepSpeedConfigJson(const FormatContext& c, FidelityBuilder& rows,
                          DeepSpeedOptimizerSource who, absl::string_view script_call) {
  const Strategy& s = c.s;
  OJson ds;
  ds["train_batch_size"] = c.in.global_batch_size;
  ds["train_micro_batch_size_per_gpu"] = s.micro_batch_size;
  ds["gradient_accumulation_steps"] = s.grad_accum_steps;

  // ZeRO: our sharding is DeepSpeed's stage. CPU offload needs a ZeRO
  // optimizer: with one data-parallel rank stage 1 shards nothing, so it
  // stands for "none"; with several it would shard, which "none" does not.
  int stage = 0;
  switch (s.sharding) {
    case Sharding::kNone:
      stage = 0;
      rows.Exact(&Strategy::sharding, "ZeRO stage 0");
      break;
    case Sharding::kZero1:
      stage = 1;
      rows.Exact(&Strategy::sharding, "zero_optimization.stage 1");
      break;
    case Sharding::kZero2:
      stage = 2;
      rows.Exact(&Strategy::sharding, "zero_optimization.stage 2");
      break;
    case Sharding::kFsdp:
      stage = 3;
      rows.Exact(&Strategy::sharding, "zero_optimization.stage 3 (parameters sharded, as FSDP)");
      break;
  }
  if (s.offload == Offload::kCpu && stage == 0) {
    if (s.data_parallel == 1) {
      stage = 1;
      rows.Exact(&Strategy::sharding,
                 "zero_optimization.stage 1 over one data-parallel rank shards nothing; it is "
                 "there because DeepSpeed offloads only under ZeRO");
    } else {
      rows.Rejected(&Strategy::offload,
                    "DeepSpeed offloads optimizer state only under ZeRO (stage >= 1), which "
                    "shards it over the data-parallel ranks; use sharding zero1/zero2/fsdp with "
                    "offload cpu, or offload none");
    }
  }
  OJson zero;
  zero["stage"] = stage;
  if (s.offload == Offload::kCpu && stage > 0) {
    zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
    rows.Exact(&Strategy::offload,
               "zero_optimization.offload_optimizer.device cpu: optimizer state and fp32 "
               "masters on the host, the step on the host (ZeRO-Offload)");
  } else if (s.offload == Offload::kNone) {
    rows.Exact(&Strategy::offload);
  }
  ds["zero_optimization"] = zero;

  switch (s.precision) {
    case Precision::kFp32:
      rows.Exact(&Strategy::precision, "neither bf16 nor fp16 enabled");
      break;
    case Precision::kBf16:
      ds["torch_autocast"] = {{"enabled", true}, {"dtype", "bfloat16"}};
      rows.Exact(&Strategy::precision,
                 "torch_autocast bfloat16: fp32 weights, bf16 autocast, no loss scaling");
      break;
    case Precision::kFp8:
      rows.Rejected(&Strategy::precision,
                    "DeepSpeed's config has no fp8 compute (its fp8 is for communication and "
                    "optimizer state); train fp8 through the megatron, torchtitan or accelerate "
                    "export");
      break;
    case Precision::kPureBf16:
      ds["bf16"] = {{"enabled", true}};
      rows.Exact(&Strategy::precision,
                 "bf16.enabled: bf16 weights, activations and gradients, fp32 master weights in "
                 "the optimizer");
      break;
    case Precision::kFp16:
      ds["fp16"] = {{"enabled", true},
                    {"loss_scale", 0},
                    {"initial_scale_power", kInitialScalePower},
                    {"loss_scale_window", kScaleWindow},
                    {"hysteresis", 1},
                    {"consecutive_hysteresis", false},
                    {"min_loss_scale", 1}};
      rows.Approximated(
          &Strategy::precision,
          "fp16.enabled keeps fp16 weights with fp32 masters in the optimizer, where ours "
          "autocasts fp32 weights; the dynamic loss scaler matches ours (start 2^16, halve and "
          "skip on overflow, double after 2000 clean steps) except that DeepSpeed never goes "
          "below min_loss_scale 1");
      break;
  }

  const bool ds_cpu_adam = s.offload == Offload::kCpu && stage > 0;
  if (who == DeepSpeedOptimizerSource::kTrainerFillsAuto) {
    // torch.optim.AdamW through torch_adam: fused=True is the one-kernel
    // _fused_adamw_, foreach=False steps one parameter at a time as ours.
    // "auto": the Trainer's own flags (transformers' HfTrainerDeepSpeedConfig).
    OJson params = {{"lr", "auto"},           {"betas", "auto"},    {"eps", "auto"},
                    {"weight_decay", "auto"}, {"torch_adam", true}, {"adam_w_mode", true}};
    ds["gradient_clipping"] = "auto";
    const std::string filled =
        "; lr, betas, eps, weight_decay and gradient_clipping \"auto\": the Trainer fills them "
        "from --learning_rate, --adam_beta1/--adam_beta2, --adam_epsilon, --weight_decay and "
        "--max_grad_norm, and builds your --lr_scheduler_type scheduler over it";
    if (ds_cpu_adam) {
      // ZeRO-Offload steps with DeepSpeedCPUAdam on the host.
      params = {{"lr", "auto"}, {"betas", "auto"}, {"eps", "auto"}, {"weight_decay", "auto"}};
      rows.Approximated(&Strategy::optimizer,
                        absl::StrCat("with offload DeepSpeed steps on the host with "
                                     "DeepSpeedCPUAdam (SIMD over all parameters), whichever "
                                     "AdamW implementation the strategy names",
                                     filled));
    } else if (s.optimizer == Optimizer::kFusedAdamW) {
      params["fused"] = true;
      rows.Exact(&Strategy::optimizer,
                 absl::StrCat("optimizer AdamW with torch_adam and fused: true", filled));
    } else {
      params["foreach"] = false;
      rows.Exact(&Strategy::optimizer,
                 absl::StrCat("optimizer AdamW with torch_adam and foreach: false (one "
                              "parameter at a time)",
                              filled));
    }
    ds["optimizer"] = {{"type", "AdamW"}, {"params", params}};
  } else {
    // No section: DeepSpeed wraps the script's optimizer (with ZeRO, its
    // partitioned copy), whose hyperparameters are the script's.
    const std::string yours = absl::StrCat(
        "ds_config.json has no optimizer section, so DeepSpeed steps the optimizer your script "
        "builds and passes to ",
        script_call, ", with your lr, betas, eps, weight decay and scheduler: build it as ");
    if (ds_cpu_adam) {
      rows.NotExpressible(
          &Strategy::optimizer,
          absl::StrCat(yours,
                       "deepspeed.ops.adam.DeepSpeedCPUAdam(model.parameters(), lr=..., "
                       "adamw_mode=True) (ZeRO-Offload refuses a torch optimizer: it steps on "
                       "the host, whichever AdamW implementation the strategy names)"));
    } else {
      rows.NotExpressible(&Strategy::optimizer,
                          absl::StrCat(yours, s.optimizer == Optimizer::kFusedAdamW
                                                  ? "torch.optim.AdamW(model.parameters(), "
                                                    "lr=..., fused=True)"
                                                  : "torch.optim.AdamW(model.parameters(), "
                                                    "lr=..., foreach=False)"));
    }
  }
  if (c.s.tensor_parallel > 1) ds["tensor_parallel"] = {{"autotp_size", s.tensor_parallel}};
  return ds;
}

FormatOutput ExportDeepSpeed(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  OJson ds = DeepSpeedConfigJson(c, rows, DeepSpeedOptimizerSource::kScriptBuildsIt,
                                 "deepspeed.initialize(model=model, optimizer=optimizer, ...)");
  // Context parallelism: DeepSpeed's closest is Ulysses. With
  // sequence_parallel_size its config counts world size / N data-parallel
  // ranks for train_batch_size, and ZeRO reduces over the sequence ranks too.
  const bool cp = s.context_parallel > 1;
  if (cp) ds["sequence_parallel_size"] = s.context_parallel;
  out.files.emplace_back("ds_config.json", JsonFile(ds));
  out.entry =
      absl::StrCat("train.py --deepspeed --deepspeed_config ", FileRef(c, "ds_config.json"));
  out.command = absl::StrCat("deepspeed --num_nodes=", c.nnodes, " --num_gpus=", c.nproc_per_node,
                             c.nnodes > 1 ? " --hostfile=hostfile" : "", " ", out.entry);

  rows.Exact(&Strategy::data_parallel,
             cp ? "data-parallel size = world size / sequence_parallel_size (DeepSpeed derives "
                  "it)"
                : "data-parallel size = world size / autotp_size (DeepSpeed derives it)");
  NoExpertParallelRows(
      s, rows,
      "DeepSpeed's expert parallelism is deepspeed.moe.layer.MoE(ep_size=...) built "
      "into the model's code; its config has no ep_size, and transformers' MoE "
      "blocks are not DeepSpeed MoE layers");
  if (!cp) {
    rows.Exact(&Strategy::context_parallel);
    rows.Exact(&Strategy::context_parallel_comm);
  } else {
    rows.Approximated(
        &Strategy::context_parallel,
        absl::StrCat("sequence_parallel_size ", s.context_parallel,
                     ": DeepSpeed-Ulysses, contiguous sequence shards and attention over whole "
                     "sequences for a share of the heads; your script registers it (mpu = "
                     "UlyssesSPAttentionHF.register_with_transformers(model, \"sdpa\", "
                     "sequence_parallel_size=",
                     s.context_parallel, ", micro_batch_size=", s.micro_batch_size,
                     ", seq_length=", c.in.seq_len,
                     "), deepspeed.initialize(..., mpu=mpu)), wraps its DataLoader in "
                     "UlyssesSPDataLoaderAdapter (batches with position_ids; each rank gets "
                     "its shard with shift_labels) and takes as loss the sequence ranks' summed "
                     "cross-entropies over their summed label counts (all_gather over "
                     "mpu.get_sequence_parallel_group())"));
    rows.Approximated(&Strategy::context_parallel_comm,
                      "Ulysses exchanges q, k, v and the output by all-to-all over the attention "
                      "heads, neither a K/V ring nor a K/V all-gather");
    const ModelSpec* m = c.in.model ? &*c.in.model : nullptr;
    const int kv_heads = m != nullptr && m->n_kv_head > 0 ? m->n_kv_head : (m ? m->n_head : 0);
    if (s.tensor_parallel > 1) {
      rows.Rejected(&Strategy::context_parallel,
                    "DeepSpeed's Ulysses groups (parallel_state_sp) take every other rank as "
                    "data-parallel, leaving none for AutoTP; use tensor_parallel 1");
    } else if (m != nullptr &&
               (m->n_head % s.context_parallel != 0 ||
                (kv_heads % s.context_parallel != 0 && s.context_parallel % kv_heads != 0))) {
      rows.Rejected(
          &Strategy::context_parallel,
          absl::StrCat("Ulysses splits the attention heads over the ", s.context_parallel,
                       " sequence ranks: they must divide the ", m->n_head,
                       " heads, and divide or be divided by the ", kv_heads, " key-value heads"));
    }
  }
  if (s.tensor_parallel == 1) {
    rows.Exact(&Strategy::tensor_parallel);
  } else {
    rows.Approximated(&Strategy::tensor_parallel,
                      absl::StrCat("tensor_parallel.autotp_size ", s.tensor_parallel,
                                   ": AutoTP splits the Hugging Face model's linear layers "
                                   "column/row-wise as Megatron does; layers it does not know "
                                   "stay replicated (give a partition_config for those)"));
  }
  NoPipelineRows(s, rows, FidelityStatus::kNotExpressible,
                 "DeepSpeed's pipeline parallelism needs the model written as a "
                 "deepspeed.pipe.PipelineModule(num_stages=P) in your code, which then runs 1F1B "
                 "with gradient_accumulation_steps micro-batches; the JSON has no pipeline key");
  if (s.sequence_parallel) {
    rows.NotExpressible(&Strategy::sequence_parallel,
                        "AutoTP has no Megatron-style sequence parallelism (DeepSpeed's "
                        "sequence_parallel_size is Ulysses, a different scheme)");
  } else {
    rows.Exact(&Strategy::sequence_parallel);
  }
  rows.Exact(&Strategy::micro_batch_size, "train_micro_batch_size_per_gpu");
  rows.Exact(&Strategy::grad_accum_steps, "gradient_accumulation_steps");
  if (s.checkpointing == Checkpointing::kNone) {
    rows.Exact(&Strategy::checkpointing);
    rows.Exact(&Strategy::checkpoint_percent);
  } else {
    rows.NotExpressible(&Strategy::checkpointing,
                        "DeepSpeed recomputes only what the model wraps in "
                        "deepspeed.checkpointing.checkpoint; with a Hugging Face model call "
                        "model.gradient_checkpointing_enable() (whole layers)");
    rows.NotExpressible(&Strategy::checkpoint_percent,
                        "which layers recompute is decided in the model's code");
  }
  AttentionAtLoadRow(s, rows, "DeepSpeed");
  if (cp && s.attention != Attention::kSdpa) {
    rows.NotExpressible(&Strategy::attention,
                        "Ulysses refuses eager attention (UlyssesSPAttentionHF): load the model "
                        "with attn_implementation=\"sdpa\", the same attention fused");
  }
  return out;
}

}  // namespace autoaccel
