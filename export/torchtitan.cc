// The torchtitan format: a job file (TOML) for torchtitan 0.2.2, run with
// `-m torchtitan.train --job.config_file autoaccel_torchtitan.toml`, and, with
// the model, the module that registers its flavor (torchtitan_model.cc).
//
// 0.2.2 is the newest torchtitan that trains with torch 2.11: 0.3.0 (which
// replaced the TOML job files by Python config functions) imports
// torch.distributed.fsdp.DataParallelMeshDims, which torch 2.11 lacks, so its
// trainer does not import. Field names and what they do are 0.2.2's
// (torchtitan/config/job_config.py, train.py, models/llama3/infra/
// parallelize.py); tests/export/run_export.py trains with the file.
#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

// A TOML document of sections in the order first set, each key once.
class Toml {
 public:
  void Set(const std::string& section, const std::string& key, const std::string& literal) {
    if (!index_.count(section)) {
      index_[section] = sections_.size();
      sections_.push_back({section, ""});
    }
    absl::StrAppend(&sections_[index_[section]].second, key, " = ", literal, "\n");
  }
  std::string Text() const {
    std::string text;
    for (const auto& [name, body] : sections_) absl::StrAppend(&text, "\n[", name, "]\n", body);
    return text;
  }

 private:
  std::vector<std::pair<std::string, std::string>> sections_;
  std::map<std::string, size_t> index_;
};

std::string Quoted(absl::string_view s) { return absl::StrCat("\"", s, "\""); }
const char* TomlBool(bool b) { return b ? "true" : "false"; }

// expert_parallel: torchtitan's ExpertParallel (distributed/
// expert_parallel.py, distributed/parallel_dims.py) on the flavor's MoE
// layers. torchtitan lays the same ranks out twice: dense (pp,
// dp_replicate, dp_shard * cp, tp) and sparse (pp, dp_replicate, efsdp, ep,
// etp), so an ep group is ep consecutive ranks of the FSDP dimension (cp
// innermost), each holding a contiguous block of E / ep experts (Shard(0)),
// and efsdp = dp_shard * cp * tp / (ep * etp) must be whole. With etp = tp
// (the experts split over the tensor-parallel ranks, as ours) ep divides
// dp_shard * cp: replicated data parallelism (data_parallel_replicate_degree)
// replicates the experts, never spreads them.
void ExpertParallel(const FormatContext& c, const TorchtitanModelFile& file, Toml& toml,
                    FidelityBuilder& rows) {
  const Strategy& s = c.s;
  if (s.expert_parallel == 1) {
    rows.Exact(&Strategy::expert_parallel,
               file.experts && s.tensor_parallel > 1
                   ? "every expert on every data-parallel rank, each split over the "
                     "tensor-parallel ranks (torchtitan's TensorParallel on GroupedExperts), as "
                     "ours"
                   : "");
    return;
  }
  if (c.in.model && !file.experts) {
    const std::string why =
        c.in.model->Info().experts
            ? absl::StrCat("the export writes ", c.in.model->family,
                           " as torchtitan 0.2.2's dense llama3 model (its grouped sigmoid router, "
                           "shared experts and latent attention are torchtitan's deepseek_v3 "
                           "model, which the export does not write)")
            : absl::StrCat("the ", c.in.model->family, " model has no experts to spread");
    rows.Rejected(&Strategy::expert_parallel,
                  absl::StrCat(why, " (allowed: expert_parallel 1, every expert on every rank)"));
    return;
  }
  const int shard_dimension =
      (s.sharding == Sharding::kFsdp ? s.data_parallel : 1) * s.context_parallel;
  if (shard_dimension % s.expert_parallel != 0) {
    rows.Rejected(
        &Strategy::expert_parallel,
        absl::StrCat("torchtitan's expert parallelism takes its ranks from the FSDP dimension, "
                     "data_parallel_shard_degree * context_parallel_degree (here ",
                     shard_dimension,
                     "), and replicates the experts over data_parallel_replicate_degree, where "
                     "sharding none puts the data-parallel ranks: use sharding fsdp"));
    return;
  }
  toml.Set("parallelism", "expert_parallel_degree", absl::StrCat(s.expert_parallel));
  // Its default 1 would take the tensor-parallel ranks into the ep groups.
  toml.Set("parallelism", "expert_tensor_parallel_degree", absl::StrCat(s.tensor_parallel));
  rows.Exact(
      &Strategy::expert_parallel,
      absl::StrCat(
          "expert_parallel_degree, expert_tensor_parallel_degree = tensor_parallel_degree: "
          "torchtitan's ExpertParallel gives each of ep consecutive data-/context-parallel ranks "
          "a contiguous block of the experts, as ours; tokens dispatched and combined "
          "all-to-all, dropless; the experts split over the tensor-parallel ranks as ours; "
          "their weights FSDP-sharded over the other dp_shard * cp / ep ranks and replicated "
          "over data_parallel_replicate_degree, gradients reduced over all dp * cp / ep",
          c.in.model ? ""
                     : " (for a flavor with experts: qwen3's MoE flavors, deepseek_v3, llama4; "
                       "a dense model ignores the key)"));
}

}  // namespace

FormatOutput ExportTorchtitan(const FormatContext& c, FidelityBuilder& rows) {
  const Strategy& s = c.s;
  FormatOutput out;
  Toml toml;
  const bool model = c.in.model.has_value();
  TorchtitanModelFile file;
  if (model) {
    file = TorchtitanModelModule(c, out.architecture);
    toml.Set("model", "name", Quoted(file.model_name));
    toml.Set("model", "flavor", Quoted("autoaccel"));
    toml.Set("experimental", "custom_import", Quoted("autoaccel_torchtitan_model"));
    out.files.emplace_back("autoaccel_torchtitan_model.py", file.module);
  }
  const auto set = [&toml](const char* section, const char* key, const std::string& literal) {
    toml.Set(section, key, literal);
  };
  // A step's micro-batches all go through the pipeline.
  set("training", "local_batch_size",
      absl::StrCat(s.pipeline_parallel == 1 ? s.micro_batch_size
                                            : s.micro_batch_size * s.grad_accum_steps));
  set("training", "global_batch_size", absl::StrCat(c.in.global_batch_size));
  set("training", "seq_len", absl::StrCat(c.in.seq_len));

  // Data parallelism: replicate (DDP) or shard (FSDP2). With context
  // parallelism torchtitan always applies FSDP2, over dp_shard * cp
  // (ParallelDims.fsdp_enabled), so the model is sharded even for "none".
  const bool fsdp = s.sharding == Sharding::kFsdp;
  const bool cp = s.context_parallel > 1;
  const bool fully_sharded = fsdp || cp;  // FSDP2 applied, mixed precision through it
  set("parallelism", "data_parallel_replicate_degree", absl::StrCat(fsdp ? 1 : s.data_parallel));
  set("parallelism", "data_parallel_shard_degree", absl::StrCat(fsdp ? s.data_parallel : 1));
  rows.Exact(&Strategy::data_parallel,
             fsdp ? "data_parallel_shard_degree" : "data_parallel_replicate_degree");
  switch (s.sharding) {
    case Sharding::kNone:
      if (cp) {
        // Closest to replicated: keep the gathered parameters from forward to backward.
        set("parallelism", "fsdp_reshard_after_forward", Quoted("never"));
        rows.Approximated(&Strategy::sharding,
                          "torchtitan applies FSDP2 over the context-parallel ranks whenever "
                          "context_parallel_degree > 1 (HSDP with data_parallel_replicate_degree): "
                          "parameters, gradients and optimizer state sharded over the cp ranks, "
                          "fsdp_reshard_after_forward \"never\"");
      } else if (s.data_parallel > 1 && (s.tensor_parallel > 1 || s.pipeline_parallel > 1)) {
        rows.Rejected(&Strategy::sharding,
                      "torchtitan's DDP is for data parallelism alone (\"DDP has not supported "
                      "> 1D parallelism\"): with tensor or pipeline parallelism use sharding fsdp");
      } else {
        rows.Exact(&Strategy::sharding, "replicated (DDP)");
      }
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
      set("parallelism", "fsdp_reshard_after_forward", Quoted("always"));
      rows.Exact(&Strategy::sharding,
                 cp ? "FSDP2 over data_parallel_shard_degree * context_parallel_degree ranks, "
                      "reshard after forward"
                    : "FSDP2 (data_parallel_shard_degree), reshard after forward");
      break;
  }
  ExpertParallel(c, file, toml, rows);
  if (!cp) {
    rows.Exact(&Strategy::context_parallel);
    rows.Exact(&Strategy::context_parallel_comm);
  } else {
    set("parallelism", "context_parallel_degree", absl::StrCat(s.context_parallel));
    set("parallelism", "context_parallel_load_balancer", Quoted("headtail"));
    // torchtitan 0.2.2's trainer never applies context_parallel_rotate_method:
    // only its validator calls set_rotate_method, so training all-gathers K/V
    // (torch's default). The key is written "allgather" so that both agree.
    set("parallelism", "context_parallel_rotate_method", Quoted("allgather"));
    rows.Exact(&Strategy::context_parallel,
               "context_parallel_degree with context_parallel_load_balancer \"headtail\": rank "
               "c holds sequence chunks c and 2*cp-1-c; torch's context parallelism runs the "
               "model's SDPA over the whole sequence");
    const int64_t divisor = int64_t{2} * s.context_parallel * s.tensor_parallel;
    if (c.in.seq_len % divisor != 0) {
      rows.Rejected(&Strategy::context_parallel,
                    absl::StrCat("torchtitan asserts seq_len divisible by tensor_parallel_degree "
                                 "* 2 * context_parallel_degree (",
                                 divisor, ")"));
    }
    if (s.context_parallel_comm == ContextParallelComm::kAllGather) {
      rows.Approximated(&Strategy::context_parallel_comm,
                        "context_parallel_rotate_method \"allgather\": K/V all-gathered once, "
                        "but attended block by block (merged by log-sum-exp) and their "
                        "gradients passed around a ring in backward");
    } else {
      rows.Approximated(&Strategy::context_parallel_comm,
                        "torchtitan 0.2.2's trainer never applies context_parallel_rotate_method "
                        "(only its validator does), so it all-gathers K/V (torch's default) "
                        "rather than passing them around a ring; the key is written "
                        "\"allgather\" to match");
    }
  }
  set("parallelism", "tensor_parallel_degree", absl::StrCat(s.tensor_parallel));
  rows.Exact(&Strategy::tensor_parallel, "tensor_parallel_degree");
  if (s.tensor_parallel > 1 && !s.sequence_parallel) {
    rows.Approximated(&Strategy::sequence_parallel,
                      "torchtitan's tensor parallelism always shards the norms' activations "
                      "over the sequence (SequenceParallel): the same results, less memory");
  } else {
    rows.Exact(&Strategy::sequence_parallel, "always on with tensor parallelism");
  }

  set("parallelism", "pipeline_parallel_degree", absl::StrCat(s.pipeline_parallel));
  rows.Exact(&Strategy::pipeline_parallel, "pipeline_parallel_degree");
  if (s.pipeline_parallel > 1 && file.model_name == "qwen3") {
    // Its TrainSpec has no pipelining_fn: the trainer raises "Pipeline
    // Parallel is enabled but qwen3 does not support pipelining".
    rows.Rejected(&Strategy::pipeline_parallel,
                  "torchtitan 0.2.2's qwen3 model (the flavor written for this family) has no "
                  "pipeline parallelism: its trainer refuses pipeline_parallel_degree > 1");
  }
  if (s.pipeline_parallel == 1) {
    rows.Exact(&Strategy::pipeline_schedule, "no pipeline");
    rows.Exact(&Strategy::virtual_stages, "no pipeline");
    rows.Exact(&Strategy::micro_batch_size, "training.local_batch_size");
    rows.Exact(&Strategy::grad_accum_steps,
               "global_batch_size / (local_batch_size * data parallel) accumulation steps");
  } else {
    set("parallelism", "pipeline_parallel_microbatch_size", absl::StrCat(s.micro_batch_size));
    rows.Exact(&Strategy::micro_batch_size, "pipeline_parallel_microbatch_size");
    rows.Exact(&Strategy::grad_accum_steps,
               "local_batch_size / pipeline_parallel_microbatch_size pipeline micro-batches");
    if (s.pipeline_schedule == PipelineSchedule::k1F1B) {
      set("parallelism", "pipeline_parallel_schedule", Quoted("1F1B"));
      rows.Exact(&Strategy::pipeline_schedule, "pipeline_parallel_schedule \"1F1B\"");
      rows.Exact(&Strategy::virtual_stages);
    } else {
      set("parallelism", "pipeline_parallel_schedule", Quoted("Interleaved1F1B"));
      rows.Exact(&Strategy::pipeline_schedule, "pipeline_parallel_schedule \"Interleaved1F1B\"");
      const int chunks = s.pipeline_parallel * s.virtual_stages;
      if (model && c.in.model->n_layer % chunks == 0) {
        set("parallelism", "pipeline_parallel_layers_per_stage",
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
      set("training", "mixed_precision_param", Quoted("float32"));
      rows.Exact(&Strategy::precision, "mixed_precision_param float32");
      break;
    case Precision::kBf16:
      set("training", "mixed_precision_param", Quoted("bfloat16"));
      if (fully_sharded) {
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
      set("training", "dtype", Quoted("bfloat16"));
      set("training", "mixed_precision_param", Quoted("bfloat16"));
      rows.Approximated(&Strategy::precision,
                        "training.dtype bfloat16: bf16 parameters, gradients and optimizer state "
                        "with no fp32 master copy");
      break;
    case Precision::kFp16:
      rows.Rejected(&Strategy::precision,
                    "torchtitan trains in bfloat16 or float32 only: no fp16 with loss scaling");
      break;
    case Precision::kFp8:
      if (!fully_sharded && (s.tensor_parallel > 1 || s.pipeline_parallel > 1)) {
        rows.Rejected(&Strategy::precision,
                      "torchtitan's bf16 around its float8 linear layers comes from FSDP2's "
                      "mixed precision (or autocast under pure DDP / one device): with tensor "
                      "or pipeline parallelism and no FSDP the rest would train in fp32; use "
                      "sharding fsdp");
        break;
      }
      set("model", "converters", "[\"quantize.linear.float8\"]");
      set("quantize.linear.float8", "recipe_name", Quoted("tensorwise"));
      // Ours keeps the routers in bf16 too; torchtitan's experts are no
      // nn.Linear, so its float8 converter leaves them in bf16.
      set("quantize.linear.float8", "filter_fqns",
          file.experts ? "[\"output\", \"router.gate\"]" : "[\"output\"]");
      set("training", "mixed_precision_param", Quoted("bfloat16"));
      rows.Approximated(
          &Strategy::precision,
          absl::StrCat(
              "converters [\"quantize.linear.float8\"], recipe_name \"tensorwise\": torchao's "
              "float8 linear layers (e4m3 inputs and weights, e5m2 gradients, per-tensor "
              "current scaling, as ours), filter_fqns [\"output\"",
              file.experts ? ", \"router.gate\"] keeps the output layer and the routers in bf16 "
                             "as ours, but the experts (GroupedExperts, no nn.Linear) compute in "
                             "bf16 where ours are fp8 (quantize.grouped_mm.float8 is torchao's "
                             "rowwise prototype); around them "
                           : "] keeps the output layer in bf16 as ours; around them ",
              fully_sharded ? "FSDP2's bf16 mixed precision: bf16 compute copies of fp32 "
                              "parameters (our masters), gradients reduced in fp32 (ours in bf16)"
                            : "bf16 autocast over fp32 weights (ours keeps bf16 weights with "
                              "fp32 masters)"));
      break;
  }
  switch (s.checkpointing) {
    case Checkpointing::kNone:
      set("activation_checkpoint", "mode", Quoted("none"));
      rows.Exact(&Strategy::checkpointing);
      rows.Exact(&Strategy::checkpoint_percent);
      break;
    case Checkpointing::kFull:
      if (s.checkpoint_percent == 100) {
        set("activation_checkpoint", "mode", Quoted("full"));
        rows.Exact(&Strategy::checkpointing, "mode \"full\": whole transformer blocks");
        rows.Exact(&Strategy::checkpoint_percent);
      } else if (100 % s.checkpoint_percent == 0) {
        // Layer-selective: every k-th block whole.
        const int every = 100 / s.checkpoint_percent;
        set("activation_checkpoint", "mode", Quoted("selective"));
        set("activation_checkpoint", "selective_ac_option", Quoted(absl::StrCat(every)));
        rows.Exact(&Strategy::checkpointing,
                   "mode \"selective\" with a layer count: whole transformer blocks");
        rows.Approximated(
            &Strategy::checkpoint_percent,
            absl::StrCat("selective_ac_option \"", every, "\": one block in ", every, " (blocks ",
                         every, ", ", 2 * every, ", ... counting from 1), not the first ",
                         s.checkpoint_percent, "%: as many blocks, other ones"));
      } else {
        set("activation_checkpoint", "mode", Quoted("full"));
        rows.Exact(&Strategy::checkpointing, "mode \"full\": whole transformer blocks");
        AllLayersCheckpointRow(s, rows, "mode \"full\"");
      }
      break;
    case Checkpointing::kSelective:
      set("activation_checkpoint", "mode", Quoted("selective"));
      set("activation_checkpoint", "selective_ac_option", Quoted("op"));
      rows.Approximated(&Strategy::checkpointing,
                        "selective_ac_option \"op\" is per-op: it saves matmul and attention "
                        "outputs and recomputes the rest, not the attention core alone");
      AllLayersCheckpointRow(s, rows, "selective_ac_option \"op\"");
      break;
  }
  if (s.attention == Attention::kSdpa) {
    rows.Exact(&Strategy::attention,
               "the models' attn_type \"sdpa\" (the flavor's default): "
               "F.scaled_dot_product_attention, cuDNN or flash kernels first");
  } else if (cp) {
    rows.NotExpressible(&Strategy::attention,
                        "torch's context parallelism dispatches SDPA's flash, memory-efficient "
                        "and cuDNN kernels only, not the math kernel: the model's SDPA computes "
                        "the same attention fused");
  } else {
    rows.NotExpressible(&Strategy::attention,
                        "torchtitan's attention is SDPA, flex or varlen; for the math kernel set "
                        "ScaledDotProductAttentionWrapper.sdpa_backends = [SDPBackend.MATH] "
                        "(torchtitan.models.attention) in code");
  }
  set("optimizer", "name", Quoted("AdamW"));
  set("optimizer", "implementation",
      Quoted(s.optimizer == Optimizer::kFusedAdamW ? "fused" : "for-loop"));
  rows.Exact(&Strategy::optimizer,
             s.optimizer == Optimizer::kFusedAdamW
                 ? "optimizer.implementation \"fused\": AdamW with fused=True; its lr, betas, "
                   "eps and weight_decay are yours (--optimizer.lr, ...; torchtitan's defaults "
                   "where you set none)"
                 : "optimizer.implementation \"for-loop\": AdamW with foreach=False, one "
                   "parameter at a time; its lr, betas, eps and weight_decay are yours "
                   "(--optimizer.lr, ...; torchtitan's defaults where you set none)");
  if (s.offload == Offload::kCpu) {
    set("training", "enable_cpu_offload", TomlBool(true));
    if (fully_sharded) {
      rows.Approximated(&Strategy::offload,
                        "enable_cpu_offload (FSDP2 CPUOffloadPolicy) keeps parameters and "
                        "gradients on the host too and steps there");
    } else {
      rows.Rejected(&Strategy::offload, "torchtitan offloads to the host only under FSDP");
    }
  } else {
    rows.Exact(&Strategy::offload);
  }

  const std::string dir = c.in.file_dir.empty() ? "." : c.in.file_dir;
  out.entry = absl::StrCat("-m torchtitan.train --job.config_file ",
                           FileRef(c, "autoaccel_torchtitan.toml"));
  if (model) out.environment = absl::StrCat("PYTHONPATH=", dir, " ");  // the flavor's module
  out.command = absl::StrCat(out.environment, TorchrunCommand(c, out.entry));
  std::string text = absl::StrCat(
      "# torchtitan job file for autoaccel's strategy\n#   ", StrategyToText(s),
      "\n# Format: torchtitan 0.2.2 (the newest that trains with torch 2.11). Run:\n#   ",
      out.command,
      " \\\n#     --model.hf_assets_path YOUR_TOKENIZER --training.dataset ... --training.steps "
      "...\n"
      "# It sets no learning rate, betas, eps, weight decay, schedule, clipping or data: add\n"
      "# yours (--optimizer.lr, --optimizer.weight_decay, --lr_scheduler.warmup_steps, ... or\n"
      "# sections of this file); torchtitan's defaults apply where you set none.\n",
      model ? "" : "# [model]: name and flavor are yours (give --model to have them written).\n",
      toml.Text());
  out.files.insert(out.files.begin(), {"autoaccel_torchtitan.toml", std::move(text)});
  return out;
}

}  // namespace autoaccel
