// The pieces several formats share (formats.h).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/formats.h"

namespace autoaccel {

std::string FileRef(const FormatContext& c, absl::string_view name) {
  return c.in.file_dir.empty() ? std::string(name) : absl::StrCat(c.in.file_dir, "/", name);
}

std::string TorchrunCommand(const FormatContext& c, const std::string& entry) {
  std::string cmd =
      absl::StrCat("torchrun --nnodes=", c.nnodes, " --nproc-per-node=", c.nproc_per_node);
  if (c.nnodes > 1) {
    // One command per node: NODE_RANK 0..nnodes-1, MASTER_ADDR the host of node 0.
    absl::StrAppend(&cmd, " --node-rank=$NODE_RANK --master-addr=$MASTER_ADDR --master-port=29500");
  }
  absl::StrAppend(&cmd, " ", entry);
  return cmd;
}

void NoPipelineRows(const Strategy& s, FidelityBuilder& rows, FidelityStatus status,
                    const std::string& note) {
  if (s.pipeline_parallel == 1) {
    rows.Exact(&Strategy::pipeline_parallel);
    rows.Exact(&Strategy::pipeline_schedule, "no pipeline");
    rows.Exact(&Strategy::virtual_stages, "no pipeline");
    return;
  }
  rows.Set(&Strategy::pipeline_parallel, status, note);
  rows.Set(&Strategy::pipeline_schedule, status, "no pipeline parallelism (see pipeline_parallel)");
  rows.Set(&Strategy::virtual_stages, status, "no pipeline parallelism (see pipeline_parallel)");
}

std::vector<ArchitectureRow> UnwrittenModelRows(const ModelSpec& m,
                                                const std::string& experts_built,
                                                const std::string& attention_built) {
  std::vector<ArchitectureRow> rows;
  if (!m.IsDecoder()) return rows;
  const ModelFamilyInfo& info = m.Info();
  auto row = [&](const char* feature, std::string value, const std::string& built,
                 absl::string_view what) {
    rows.push_back({feature, std::move(value), FidelityStatus::kNotExpressible,
                    absl::StrCat("the export writes nothing for ", what, ": ", built)});
  };
  if (info.latent_attention) {
    row("latent_attention",
        absl::StrCat("q_lora_rank ", m.q_lora_rank, ", kv_lora_rank ", m.kv_lora_rank,
                     ", qk heads ", m.qk_nope_head_dim, " + ", m.qk_rope_head_dim, ", v heads ",
                     m.v_head_dim),
        attention_built, "multi-head latent attention");
  }
  if (info.attention_sinks) {
    row("attention_sinks", "one learned logit per head in each softmax", attention_built,
        "GPT-OSS's attention sinks");
  }
  if (!info.experts) return rows;
  if (info.clamped_swiglu) {
    row("expert_activation",
        absl::StrCat("clamped SwiGLU (alpha ", m.swiglu_alpha, ", limit ", m.swiglu_limit,
                     "), expert biases"),
        experts_built, "GPT-OSS's clamped SwiGLU experts and their biases");
  }
  if (info.moe_width) {
    row("expert_width", absl::StrCat(m.ExpertWidth()), experts_built,
        absl::StrCat("the experts' own width (the dense layers' is ", m.n_inner, ")"));
  }
  if (!m.dense_mlp_layers.empty()) {
    row("dense_layers", absl::StrJoin(m.dense_mlp_layers, ","), experts_built,
        "the layers with a dense MLP");
  }
  if (info.router == MoeRouter::kGroupedSigmoid) {
    row("router",
        absl::StrCat("sigmoid scores with correction biases, top ", m.topk_group, " of ", m.n_group,
                     " groups, scaled by ", m.routed_scaling_factor,
                     m.norm_topk_prob ? ", renormalised" : ""),
        experts_built, "DeepSeek-V3's grouped sigmoid router");
  } else if (info.router == MoeRouter::kTopKSoftmax) {
    row("router", "biased logits, top-k, softmax over the k", experts_built,
        "GPT-OSS's router (its bias, softmax after the top-k)");
  } else if (!m.norm_topk_prob) {
    row("router", "softmax top-k, not renormalised", experts_built,
        "top-k weights left as the softmax gave them");
  }
  if (info.shared_experts) {
    row("shared_experts", absl::StrCat(m.n_shared_experts, " x ", m.ExpertWidth()), experts_built,
        "the shared experts");
  }
  return rows;
}

void NoContextParallelRows(const Strategy& s, FidelityBuilder& rows, const std::string& why) {
  if (s.context_parallel == 1) {
    rows.Exact(&Strategy::context_parallel);
    rows.Exact(&Strategy::context_parallel_comm);
    return;
  }
  rows.Rejected(&Strategy::context_parallel, why);
  rows.Rejected(&Strategy::context_parallel_comm, "no context parallelism (see context_parallel)");
}

void NoExpertParallelRows(const Strategy& s, FidelityBuilder& rows, const std::string& why) {
  if (s.expert_parallel == 1) {
    rows.Exact(&Strategy::expert_parallel);
  } else {
    rows.Rejected(&Strategy::expert_parallel,
                  absl::StrCat(why, " (allowed: expert_parallel 1, every expert on every rank)"));
  }
}

std::string TorchCommStrategy(const Strategy& s, FidelityBuilder& rows,
                              const std::function<std::string(const char*)>& spelled) {
  if (s.context_parallel_comm == ContextParallelComm::kP2p) {
    rows.Approximated(&Strategy::context_parallel_comm,
                      absl::StrCat(spelled("alltoall"),
                                   ": torch's ring, each K/V block passed to the next rank while "
                                   "the one in hand is attended, by an all-to-all collective "
                                   "rather than point-to-point sends"));
    return "alltoall";
  }
  rows.Approximated(&Strategy::context_parallel_comm,
                    absl::StrCat(spelled("allgather"),
                                 ": K/V all-gathered once, but attended block by block (merged "
                                 "by log-sum-exp) and their gradients passed around a ring in "
                                 "backward"));
  return "allgather";
}

void AllLayersCheckpointRow(const Strategy& s, FidelityBuilder& rows, const std::string& how) {
  if (s.checkpointing == Checkpointing::kNone || s.checkpoint_percent == 100) {
    rows.Exact(&Strategy::checkpoint_percent);
  } else {
    rows.Approximated(&Strategy::checkpoint_percent,
                      absl::StrCat(how, " applies to every layer, not the first ",
                                   s.checkpoint_percent, "%: more recompute, less memory"));
  }
}

void AttentionAtLoadRow(const Strategy& s, FidelityBuilder& rows, absl::string_view framework) {
  rows.NotExpressible(
      &Strategy::attention,
      absl::StrCat("not a ", framework, " setting: load the model with attn_implementation=\"",
                   s.attention == Attention::kSdpa ? "sdpa" : "eager", "\""));
}

std::string JsonFile(const nlohmann::ordered_json& j) { return j.dump(2) + "\n"; }

}  // namespace autoaccel
