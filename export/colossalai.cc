// The colossalai format: autoaccel_colossalai.py, a module whose
// make_plugin() returns the ColossalAI 0.5.0 Booster plugin for the strategy
// and make_booster() the Booster around it, with what no plugin argument
// carries (micro-batch, accumulation, autocast, checkpointing, attention) as
// constants for the training loop. Which plugin:
//   sharding fsdp                          GeminiPlugin (ZeRO-3 in chunks)
//   tp, pp or cp > 1 (sequence parallel)   HybridParallelPlugin (cp: ring_attn)
//   zero1 / zero2, or offload              LowLevelZeroPlugin
//   pure_bf16, nothing else                HybridParallelPlugin(tp_size=1, pp_size=1)
//   otherwise                              TorchDDPPlugin
// What each argument does is read from colossalai 0.5.0's sources
// (booster/plugin/*.py, booster/mixed_precision/, zero/, shardformer/).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

enum class Plugin { kTorchDdp, kLowLevelZero, kGemini, kHybrid };

absl::string_view PluginName(Plugin p) {
  switch (p) {
    case Plugin::kTorchDdp:
      return "TorchDDPPlugin";
    case Plugin::kLowLevelZero:
      return "LowLevelZeroPlugin";
    case Plugin::kGemini:
      return "GeminiPlugin";
    case Plugin::kHybrid:
      return "HybridParallelPlugin";
  }
  return "?";
}

// Our fp16 loss scaler (torch.amp.GradScaler's defaults): start at 2^16,
// halve on every overflow, double after 2000 clean steps. ColossalAI's
// DynamicGradScaler halves after `hysteresis` overflows (default 2) and grows
// every 1000 steps (LowLevelZeroPlugin starts at 2^32).
void AddLossScaler(std::vector<std::string>& args) {
  args.push_back("initial_scale=2**16");
  args.push_back("growth_interval=2000");
  args.push_back("hysteresis=1");
}

std::string PyString(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

}  // namespace

FormatOutput ExportColossalAI(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  const bool pipelined = s.pipeline_parallel > 1;

  const bool cp = s.context_parallel > 1;
  Plugin plugin = Plugin::kTorchDdp;
  if (s.sharding == Sharding::kFsdp) {
    plugin = Plugin::kGemini;
  } else if (s.tensor_parallel > 1 || pipelined || cp) {
    plugin = Plugin::kHybrid;
  } else if (s.sharding != Sharding::kNone || s.offload == Offload::kCpu) {
    plugin = Plugin::kLowLevelZero;
  } else if (s.precision == Precision::kPureBf16) {
    plugin = Plugin::kHybrid;  // the plugin that keeps bf16 weights with fp32 masters
  }
  std::vector<std::string> args;
  const std::string plugin_name(PluginName(plugin));

  // Layout.
  rows.Exact(&Strategy::data_parallel,
             cp ? "data-parallel size = world size / (tp x pp x sp_size): the plugin derives it "
                  "from the ranks torchrun starts"
                : "data-parallel size = world size / (tp x pp): the plugin derives it from the "
                  "ranks torchrun starts");
  if (plugin == Plugin::kHybrid) {
    args.push_back(absl::StrCat("tp_size=", s.tensor_parallel));
    args.push_back(absl::StrCat("pp_size=", s.pipeline_parallel));
  } else if (plugin == Plugin::kGemini && s.tensor_parallel > 1) {
    args.push_back(absl::StrCat("tp_size=", s.tensor_parallel));
  }
  if (s.tensor_parallel == 1) {
    rows.Exact(&Strategy::tensor_parallel);
  } else {
    rows.Exact(&Strategy::tensor_parallel,
               absl::StrCat("tp_size=", s.tensor_parallel,
                            ": Shardformer splits the model's attention and MLP linears "
                            "column/row-wise as Megatron does, by the policy ColossalAI has for "
                            "its class (Llama, Qwen2, Mistral, GPT-2, BERT, ...; "
                            "colossalai.shardformer.policies.auto_policy); another model needs "
                            "custom_policy="));
  }
  if (!pipelined) {
    NoPipelineRows(s, rows, FidelityStatus::kExact, "");
  } else if (plugin == Plugin::kGemini) {
    NoPipelineRows(s, rows, FidelityStatus::kRejected,
                   "GeminiPlugin (ZeRO-3) has no pipeline parallelism");
  } else {
    rows.Exact(&Strategy::pipeline_parallel,
               absl::StrCat("pp_size=", s.pipeline_parallel,
                            ": Shardformer gives each stage an even share of the decoder layers; "
                            "run each step with booster.execute_pipeline"));
    if (s.pipeline_schedule == PipelineSchedule::k1F1B) {
      args.push_back("pp_style=\"1f1b\"");
      rows.Exact(&Strategy::pipeline_schedule, "pp_style=\"1f1b\"");
      rows.Exact(&Strategy::virtual_stages, "1f1b: one model chunk per stage");
    } else {
      args.push_back("pp_style=\"interleaved\"");
      args.push_back(absl::StrCat("num_model_chunks=", s.virtual_stages));
      rows.Exact(&Strategy::pipeline_schedule, "pp_style=\"interleaved\"");
      rows.Exact(&Strategy::virtual_stages, "num_model_chunks");
    }
  }
  // Context parallelism: HybridParallelPlugin's zig-zag ring attention
  // (sequence_parallelism_mode "ring_attn"), its mesh (dp, pp, sp, tp) with
  // ZeRO and gradient reduction over dp x sp. It takes the plugin's one
  // sequence-parallelism mode.
  const ModelSpec* model = c.in.model ? &*c.in.model : nullptr;
  NoExpertParallelRows(
      s, rows,
      "ColossalAI spreads experts with MoeHybridParallelPlugin(ep_size=...), which this "
      "export does not write (it writes HybridParallelPlugin or GeminiPlugin)");
  if (!cp) {
    rows.Exact(&Strategy::context_parallel);
    rows.Exact(&Strategy::context_parallel_comm);
  } else if (plugin == Plugin::kGemini) {
    rows.Rejected(&Strategy::context_parallel,
                  "GeminiPlugin (ZeRO-3) has no ring attention, only HybridParallelPlugin "
                  "(ZeRO 0-2) has; use sharding none, zero1 or zero2");
    rows.Rejected(&Strategy::context_parallel_comm,
                  "no context parallelism here (see context_parallel)");
  } else {
    args.push_back("enable_sequence_parallelism=True");
    args.push_back("sequence_parallelism_mode=\"ring_attn\"");
    args.push_back(absl::StrCat("sp_size=", s.context_parallel));
    rows.Exact(&Strategy::context_parallel,
               absl::StrCat("sequence_parallelism_mode=\"ring_attn\", sp_size=", s.context_parallel,
                            ": Shardformer's Llama and GPT-2 models split each sequence zig-zag "
                            "(rank c holds chunks c and 2*cp-1-c) and run flash-attn's kernels "
                            "(the flash-attn package) around the ring"));
    if (s.context_parallel_comm == ContextParallelComm::kP2p) {
      rows.Exact(&Strategy::context_parallel_comm,
                 "ring_attn passes K/V to the next rank point-to-point, overlapped with "
                 "attention");
    } else {
      rows.Approximated(&Strategy::context_parallel_comm,
                        "ColossalAI's context parallelism is a ring only: ring_attn passes K/V "
                        "point-to-point around it rather than all-gathering them");
    }
    if (model != nullptr && model->family != "llama" && model->family != "gpt2") {
      rows.Rejected(&Strategy::context_parallel,
                    absl::StrCat("Shardformer runs ring_attn in Llama and GPT-2 models (and "
                                 "Cohere's), not ",
                                 model->family));
    } else if (s.precision == Precision::kFp32) {
      rows.Rejected(&Strategy::context_parallel,
                    "ring_attn runs flash-attn's kernels, which take fp16/bf16, not fp32");
    }
  }
  if (!s.sequence_parallel) {
    rows.Exact(&Strategy::sequence_parallel);
  } else if (cp && plugin == Plugin::kHybrid) {
    rows.Approximated(&Strategy::sequence_parallel,
                      "the plugin's one sequence_parallelism_mode is ring_attn, so the "
                      "tensor-parallel ranks do not split the norms along the sequence: the "
                      "same results, more activation memory");
  } else if (plugin == Plugin::kHybrid) {
    args.push_back("enable_sequence_parallelism=True");
    args.push_back("sequence_parallelism_mode=\"split_gather\"");
    rows.Exact(&Strategy::sequence_parallel,
               "sequence_parallelism_mode=\"split_gather\": Megatron's, norms and dropout split "
               "along the sequence over the tensor-parallel group (the plugin's default mode, "
               "all_to_all, is another scheme)");
  } else {  // Gemini: its ShardConfig's mode is split_gather
    args.push_back("enable_sequence_parallelism=True");
    rows.Exact(&Strategy::sequence_parallel,
               "enable_sequence_parallelism=True: Shardformer's split_gather, Megatron's scheme");
  }

  // Sharding and offload. ColossalAI offloads only under ZeRO; with one
  // data-parallel rank stage 1 shards nothing and stands in for none.
  int zero_stage = 0;
  switch (s.sharding) {
    case Sharding::kNone:
      zero_stage = s.offload == Offload::kCpu && s.data_parallel == 1 ? 1 : 0;
      break;
    case Sharding::kZero1:
      zero_stage = 1;
      break;
    case Sharding::kZero2:
      zero_stage = 2;
      break;
    case Sharding::kFsdp:
      zero_stage = 3;
      break;
  }
  const std::string shards_nothing =
      "stage 1 over one data-parallel rank shards nothing: it is there because ColossalAI "
      "offloads only under ZeRO";
  switch (plugin) {
    case Plugin::kTorchDdp:
      rows.Exact(&Strategy::sharding, "TorchDDPPlugin: torch DistributedDataParallel");
      break;
    case Plugin::kLowLevelZero:
      args.push_back(absl::StrCat("stage=", zero_stage));
      rows.Exact(&Strategy::sharding,
                 s.sharding == Sharding::kNone
                     ? absl::StrCat("LowLevelZeroPlugin ", shards_nothing)
                     : absl::StrCat("LowLevelZeroPlugin(stage=", zero_stage,
                                    zero_stage == 1
                                        ? "): optimizer state and fp32 masters sharded over the "
                                          "data-parallel ranks"
                                        : "): gradients reduce-scattered and sharded too"));
      break;
    case Plugin::kHybrid:
      args.push_back(absl::StrCat("zero_stage=", zero_stage));
      if (s.sharding == Sharding::kZero2 && pipelined) {
        rows.Rejected(&Strategy::sharding,
                      "HybridParallelPlugin asserts zero_stage <= 1 with pp_size > 1 (gradient "
                      "synchronisation per micro-batch); use zero1");
      } else if (s.sharding == Sharding::kNone) {
        rows.Exact(&Strategy::sharding, zero_stage == 0
                                            ? "zero_stage=0: DistributedDataParallel over the "
                                              "data-parallel group"
                                            : absl::StrCat("zero_stage=1: ", shards_nothing));
      } else {
        rows.Exact(&Strategy::sharding,
                   absl::StrCat("zero_stage=", zero_stage, " over the data-parallel group"));
      }
      break;
    case Plugin::kGemini:
      args.push_back("placement_policy=\"static\"");
      args.push_back("shard_param_frac=1.0");
      if (!pipelined) {
        rows.Exact(&Strategy::sharding,
                   "GeminiPlugin, static placement, shard_param_frac=1.0: parameters, gradients "
                   "and optimizer state sharded in chunks (ZeRO-3), each chunk gathered for "
                   "forward and backward and freed after");
      } else {
        rows.Rejected(&Strategy::sharding,
                      "no ColossalAI plugin shards parameters under pipeline parallelism "
                      "(GeminiPlugin has none; HybridParallelPlugin's zero_stage stops at 1 "
                      "there); use zero1");
      }
      break;
  }
  if (s.offload == Offload::kNone) {
    rows.Exact(&Strategy::offload);
  } else if (plugin == Plugin::kGemini) {
    args.push_back("offload_optim_frac=1.0");
    rows.Exact(&Strategy::offload,
               "offload_optim_frac=1.0: the optimizer state and fp32 master chunks on the host, "
               "stepped there by HybridAdam's CPU kernel");
  } else if (zero_stage == 0) {
    rows.Rejected(&Strategy::offload,
                  "ColossalAI offloads only under ZeRO (cpu_offload of LowLevelZeroPlugin, or "
                  "of HybridParallelPlugin with zero_stage >= 1), which shards over the "
                  "data-parallel ranks; use sharding zero1/zero2/fsdp with offload cpu, or "
                  "offload none");
  } else {
    args.push_back("cpu_offload=True");
    rows.Exact(&Strategy::offload,
               "cpu_offload=True: gradients, fp32 master weights and optimizer state on the "
               "host, the optimizer step there");
  }

  // Precision. A plugin that can train in fp32 keeps fp32 weights for our
  // bf16 and the forward autocasts (AUTOCAST_DTYPE): precision="bf16" would
  // cast the weights (our pure_bf16), and Booster(mixed_precision="bf16") is
  // an abstract class in 0.5.0 (TypeError).
  const bool can_fp32 = plugin == Plugin::kTorchDdp || plugin == Plugin::kLowLevelZero ||
                        (plugin == Plugin::kHybrid && zero_stage == 0);
  std::string autocast = "None";
  std::string booster_precision;
  std::string precision;  // the plugin's precision= argument; empty for TorchDDPPlugin
  switch (s.precision) {
    case Precision::kFp32:
      if (plugin == Plugin::kGemini) {
        rows.Rejected(&Strategy::precision,
                      "GeminiPlugin trains in fp16 or bf16 only (fp32 masters in the optimizer); "
                      "use precision bf16 or pure_bf16 with fsdp, or sharding zero1/zero2");
      } else if (!can_fp32) {
        rows.Rejected(&Strategy::precision,
                      "HybridParallelPlugin asserts precision fp16 or bf16 under ZeRO "
                      "(zero_stage >= 1); use precision bf16 or pure_bf16, or sharding none");
      } else {
        rows.Exact(&Strategy::precision,
                   plugin == Plugin::kTorchDdp ? "no mixed precision" : "precision=\"fp32\"");
      }
      precision = "fp32";
      break;
    case Precision::kBf16:
      if (can_fp32) {
        precision = "fp32";
        autocast = "\"bfloat16\"";
        rows.NotExpressible(
            &Strategy::precision,
            absl::StrCat(plugin == Plugin::kTorchDdp ? "TorchDDPPlugin has no precision and "
                                                     : "precision=\"fp32\" keeps the weights "
                                                       "fp32, and ",
                         "Booster(mixed_precision=\"bf16\") is an abstract class in 0.5.0 "
                         "(TypeError): run the forward under torch.autocast(device_type, "
                         "dtype=torch.bfloat16) (AUTOCAST_DTYPE); precision=\"bf16\" would "
                         "cast the weights to bf16 (our pure_bf16)"));
      } else {
        precision = "bf16";
        rows.Approximated(&Strategy::precision,
                          absl::StrCat("precision=\"bf16\": bf16 weights, activations and "
                                       "gradients with fp32 master weights in the optimizer (our "
                                       "pure_bf16), not autocast over fp32 weights: ",
                                       plugin_name,
                                       plugin == Plugin::kGemini ? " trains in fp16/bf16 only"
                                                                 : " refuses fp32 under ZeRO"));
      }
      break;
    case Precision::kPureBf16:
      precision = "bf16";
      rows.Exact(&Strategy::precision,
                 "precision=\"bf16\": the model cast to bf16, fp32 master copies in the "
                 "optimizer, copied back each step");
      break;
    case Precision::kFp8:
      rows.Rejected(&Strategy::precision,
                    "ColossalAI's plugins compute in fp16, bf16 or fp32 (their fp8 is for "
                    "communication only); train fp8 through the megatron, torchtitan or "
                    "accelerate export");
      break;
    case Precision::kFp16:
      if (plugin == Plugin::kTorchDdp) {
        booster_precision = "fp16";
        rows.Exact(&Strategy::precision,
                   "Booster(mixed_precision=\"fp16\") (make_booster): torch autocast fp16 with "
                   "a GradScaler starting at 2^16, growing after 2000 clean steps, as ours");
      } else {
        precision = "fp16";
        AddLossScaler(args);
        rows.Approximated(
            &Strategy::precision,
            "precision=\"fp16\" keeps fp16 weights with fp32 masters in the optimizer, where ours "
            "autocasts fp32 weights; its DynamicGradScaler gets ours (initial_scale 2^16, halve "
            "on every overflow: hysteresis 1, double after growth_interval 2000 clean steps) "
            "but stays within [1, 2^32]");
      }
      break;
  }
  if (plugin != Plugin::kTorchDdp) args.push_back(absl::StrCat("precision=", PyString(precision)));

  // Batch and accumulation.
  if (pipelined) {
    args.push_back(absl::StrCat("num_microbatches=", s.grad_accum_steps));
    args.push_back(absl::StrCat("microbatch_size=", s.micro_batch_size));
    rows.Exact(&Strategy::micro_batch_size,
               "microbatch_size: booster.execute_pipeline splits each batch of "
               "MICRO_BATCH_SIZE x GRAD_ACCUM_STEPS into micro-batches of this size");
    if (s.pipeline_schedule == PipelineSchedule::k1F1B &&
        s.grad_accum_steps < s.pipeline_parallel) {
      rows.Rejected(&Strategy::grad_accum_steps,
                    "ColossalAI's 1F1B schedule asserts at least pp_size micro-batches a step");
    } else if (s.pipeline_schedule == PipelineSchedule::kInterleaved &&
               s.grad_accum_steps % s.pipeline_parallel != 0) {
      rows.Rejected(&Strategy::grad_accum_steps,
                    "ColossalAI's interleaved schedule asserts a multiple of pp_size "
                    "micro-batches a step");
    } else {
      rows.Exact(&Strategy::grad_accum_steps,
                 "num_microbatches: one booster.execute_pipeline and optimizer.step() a step");
    }
  } else {
    rows.NotExpressible(&Strategy::micro_batch_size,
                        "no plugin argument: your DataLoader's batch size, "
                        "plugin.prepare_dataloader(dataset, batch_size=MICRO_BATCH_SIZE)");
    std::string loop =
        "no plugin argument: your loop runs GRAD_ACCUM_STEPS micro-batches per "
        "optimizer.step(), booster.backward(loss / GRAD_ACCUM_STEPS, optimizer) each";
    if (plugin == Plugin::kGemini) {
      if (s.grad_accum_steps > 1) args.push_back("enable_gradient_accumulation=True");
      absl::StrAppend(&loop,
                      "; GeminiPlugin has no no_sync: enable_gradient_accumulation=True keeps "
                      "the gradients between them");
    } else if (zero_stage == 2) {
      absl::StrAppend(&loop,
                      "; ZeRO-2 has no no_sync: it reduce-scatters the gradients of every "
                      "micro-batch");
    } else {
      absl::StrAppend(&loop, ", all but the last under booster.no_sync(model, optimizer)");
    }
    rows.NotExpressible(&Strategy::grad_accum_steps, loop);
  }

  // Checkpointing: no plugin argument turns it on.
  const bool checkpointing = s.checkpointing != Checkpointing::kNone;
  if (!checkpointing) {
    rows.Exact(&Strategy::checkpointing);
  } else {
    rows.NotExpressible(
        &Strategy::checkpointing,
        absl::StrCat("no plugin argument: call model.gradient_checkpointing_enable() on the "
                     "Hugging Face model before booster.boost (GRADIENT_CHECKPOINTING); "
                     "the model's forward then recomputes whole decoder layers",
                     s.checkpointing == Checkpointing::kSelective
                         ? " (ColossalAI has no attention-only recompute)"
                         : ""));
  }
  const bool stage_share = checkpointing && pipelined && s.checkpoint_percent < 100;
  if (stage_share) {
    args.push_back(absl::StrCat(
        "gradient_checkpoint_config=PipelineGradientCheckpointConfig(gradient_checkpointing_ratio=",
        s.checkpoint_percent / 100.0, ")"));
    rows.Approximated(&Strategy::checkpoint_percent,
                      "gradient_checkpoint_config: each pipeline stage recomputes its first "
                      "floor(ratio x its layers), not the model's first ceil(layers x pct / 100)");
  } else {
    AllLayersCheckpointRow(s, rows, "gradient_checkpointing_enable()");
  }
  AttentionAtLoadRow(s, rows, "ColossalAI plugin");
  if (cp && plugin == Plugin::kHybrid) {
    rows.Approximated(&Strategy::attention,
                      "ring_attn turns on enable_flash_attention: flash-attn's kernels whatever "
                      "attn_implementation the model is loaded with");
  }

  const std::string fused = s.optimizer == Optimizer::kFusedAdamW ? "fused=True" : "foreach=False";
  if (plugin == Plugin::kGemini) {
    rows.NotExpressible(
        &Strategy::optimizer,
        "GeminiPlugin steps only ColossalAI's Adams (its GeminiOptimizer refuses others): build "
        "colossalai.nn.optimizer.HybridAdam(model.parameters(), lr=..., betas=..., eps=..., "
        "weight_decay=..., adamw_mode=True) with your hyperparameters and pass it to "
        "booster.boost; it steps with a fused multi-tensor kernel whichever AdamW the strategy "
        "names");
  } else {
    rows.NotExpressible(
        &Strategy::optimizer,
        absl::StrCat("the optimizer is your script's: build torch.optim.AdamW(model.parameters(), "
                     "lr=..., ",
                     fused,
                     ") with your hyperparameters and pass it to booster.boost, which wraps it "
                     "(fp32 master copies, ZeRO shards) and keeps its lr, betas, eps, weight "
                     "decay and param groups; no plugin argument names the optimizer, and "
                     "max_norm (gradient clipping) is left at its 0, off"));
  }

  // The module.
  std::string py = absl::StrCat(
      "# ColossalAI Booster plugin for autoaccel's strategy\n#   ", StrategyToText(s),
      "\n# Format: colossalai 0.5.0. In your training script, started with\n#   ",
      "PYTHONPATH=", c.in.file_dir.empty() ? "." : c.in.file_dir, " ",
      TorchrunCommand(c, "train.py"),
      "\n# do:\n"
      "#   import colossalai, autoaccel_colossalai as aa\n"
      "#   colossalai.launch_from_torch()\n"
      "#   booster = aa.make_booster()\n"
      "#   model, optimizer, *_ = booster.boost(model, optimizer)\n"
      "# What no plugin argument carries is below, for your loop; `autoaccel export` prints\n"
      "# what ColossalAI does with each dimension (its fidelity report).\n");
  absl::StrAppend(
      &py, "from colossalai.booster import Booster\n", "from colossalai.booster.plugin import ",
      plugin_name, "\n",
      stage_share ? "from colossalai.shardformer import PipelineGradientCheckpointConfig\n" : "",
      "\n");
  absl::StrAppend(
      &py, "MICRO_BATCH_SIZE = ", s.micro_batch_size, "  # samples per forward pass on one rank\n",
      "GRAD_ACCUM_STEPS = ", s.grad_accum_steps, "  # micro-batches per optimizer step\n",
      "AUTOCAST_DTYPE = ", autocast, "  # run the forward under torch.autocast(dtype=...)\n",
      "GRADIENT_CHECKPOINTING = ", checkpointing ? "True" : "False",
      "  # model.gradient_checkpointing_enable() before boost\n",
      "ATTN_IMPLEMENTATION = ", PyString(s.attention == Attention::kSdpa ? "sdpa" : "eager"),
      "  # from_pretrained(..., attn_implementation=...)\n\n\n", "def make_plugin():\n    return ",
      plugin_name, "(");
  if (!args.empty()) {
    absl::StrAppend(&py, "\n");
    for (const std::string& a : args) absl::StrAppend(&py, "        ", a, ",\n");
    absl::StrAppend(&py, "    ");
  }
  absl::StrAppend(&py, ")\n\n\ndef make_booster():\n    return Booster(plugin=make_plugin()",
                  booster_precision.empty()
                      ? ""
                      : absl::StrCat(", mixed_precision=", PyString(booster_precision)),
                  ")\n");
  out.files.emplace_back("autoaccel_colossalai.py", py);
  out.entry = "train.py";
  // The module is imported from the export's directory.
  out.environment = absl::StrCat("PYTHONPATH=", c.in.file_dir.empty() ? "." : c.in.file_dir, " ");
  out.command = absl::StrCat(out.environment, TorchrunCommand(c, out.entry));
  return out;
}

}  // namespace autoaccel
