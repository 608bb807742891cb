// The torchtitan format's model: a flavor of one of torchtitan 0.2.2's own
// models (llama3; qwen3 for Qwen3, and with torchtitan's mixture of experts
// for Qwen3-MoE and Mixtral) with the sizes of the user's config.json,
// registered by a module the job file imports
// (experimental.custom_import), and the architecture section, one row per
// feature saying whether that model builds what the config says (exact),
// something close (approximated), or cannot (not_expressible: torchtitan's
// model has no field for it; the note says what to do in code).
//
// Field names and what they do are torchtitan 0.2.2's
// (torchtitan/models/llama3/model/args.py TransformerModelArgs,
// models/qwen3/model/args.py Qwen3ModelArgs, models/moe/moe.py MoEArgs,
// and their model.py);
// tests/export/check_torchtitan.py builds every family's flavor with
// torchtitan and compares its parameter count with transformers'.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

constexpr FidelityStatus kExact = FidelityStatus::kExact;
constexpr FidelityStatus kNotExpressible = FidelityStatus::kNotExpressible;

// `v` as a Python literal that reads back as `v`.
std::string Py(double v) {
  char buffer[32];
  for (int digits : {6, 15, 17}) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  std::string s = buffer;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

const char* PyBool(bool b) { return b ? "True" : "False"; }

class TorchtitanModel {
 public:
  TorchtitanModel(const FormatContext& c, std::vector<ArchitectureRow>& rows)
      : m_(*c.in.model),
        info_(m_.Info()),
        seq_len_(c.in.seq_len),
        precision_(c.s.precision),
        // torchtitan's MoE routes as transformers' Qwen3-MoE and Mixtral do
        // (a softmax over every expert, the top k); DeepSeek-V3's grouped
        // sigmoid router needs torchtitan's deepseek_v3 model, not written.
        moe_(info_.experts && info_.router == MoeRouter::kSoftmax),
        rows_(rows) {}

  TorchtitanModelFile Write() {
    // qwen3's network is llama3's with q/k norms (a flag), head_dim of its
    // own, halves rotated as transformers, tying as a flag and an MoE
    // feed-forward: the MoE families are its flavors.
    const bool qwen3 = m_.family == "qwen3" || moe_;
    Network();
    Sizes(qwen3);
    Normalization();
    Activation();
    Biases();
    Positions(qwen3);
    Embeddings(qwen3);
    Others();
    TorchtitanModelFile file;
    file.model_name = qwen3 ? "qwen3" : "llama3";
    file.experts = moe_;
    file.module = absl::StrCat(
        "# Registers the flavor \"autoaccel\" of torchtitan 0.2.2's ", file.model_name,
        " model: the network of\n# your config.json (", m_.family,
        "), as `autoaccel export` read it. The job file imports it\n"
        "# (experimental.custom_import) and names the flavor (model.flavor).\n",
        qwen3 ? "from torchtitan.models.qwen3 import qwen3_args as flavors\n"
                "from torchtitan.models.qwen3.model.args import Qwen3ModelArgs as Args\n"
              : "from torchtitan.models.llama3 import llama3_args as flavors\n"
                "from torchtitan.models.llama3.model.args import RoPEScalingArgs, "
                "TransformerModelArgs as Args\n",
        moe_ ? "from torchtitan.models.moe import MoEArgs\n" : "",
        "\nflavors[\"autoaccel\"] = Args(\n", args_, ")\n");
    return file;
  }

 private:
  template <typename T>
  void Arg(absl::string_view name, const T& value) {
    absl::StrAppend(&args_, "    ", name, "=", value, ",\n");
  }
  void Row(absl::string_view feature, std::string value, FidelityStatus status, std::string note) {
    rows_.push_back({std::string(feature), std::move(value), status, std::move(note)});
  }

  void Network() {
    if (info_.network == Network::kDecoder) {
      Row("network", m_.family, kExact,
          m_.family == "qwen3"
              ? "torchtitan's qwen3 model: a pre-norm causal decoder with the features below"
          : m_.family == "mixtral"
              ? "torchtitan's qwen3 model with qk_norm off and moe_enabled (torchtitan has no "
                "Mixtral model; Mixtral's network is qwen3's without the q/k norms): a pre-norm "
                "causal decoder of mixture-of-experts layers with the features below"
          : moe_ ? "torchtitan's qwen3 model with moe_enabled: a pre-norm causal decoder of "
                   "mixture-of-experts layers with the features below"
                 : "torchtitan's llama3 model: a pre-norm causal decoder with the features below");
      return;
    }
    Row("network", m_.family, kNotExpressible,
        absl::StrCat("torchtitan has no ", info_.network == Network::kGpt2 ? "GPT-2" : "BERT",
                     " model: the flavor written is a llama3 decoder of the config's sizes; "
                     "train this model with the hf-trainer, accelerate or deepspeed export"));
  }

  void Sizes(bool qwen3) {
    const int groups = m_.n_kv_head > 0 ? m_.n_kv_head : m_.n_head;
    Arg("dim", m_.n_embd);
    Arg("n_layers", m_.n_layer);
    Arg("n_heads", m_.n_head);
    Arg("n_kv_heads", groups);
    Arg("vocab_size", m_.vocab_size);
    Arg("max_seq_len", std::max(m_.n_positions, seq_len_));
    Row("sizes",
        absl::StrCat("layers ", m_.n_layer, ", hidden ", m_.n_embd, ", heads ", m_.n_head, ", ffn ",
                     m_.n_inner,
                     info_.moe_width ? absl::StrCat(", experts ", m_.ExpertWidth())
                     : info_.experts ? std::string(" per expert")
                                     : std::string(),
                     ", vocabulary ", m_.vocab_size),
        kExact,
        moe_    ? "dim, n_layers, n_heads, hidden_dim, moe_inter_dim, vocab_size"
        : qwen3 ? "dim, n_layers, n_heads, hidden_dim, vocab_size"
                : "dim, n_layers, n_heads, vocab_size; the MLP width below");
    Row("query_groups", absl::StrCat(groups), kExact,
        groups == m_.n_head ? "n_kv_heads: one key/value head per query head"
                            : absl::StrCat("n_kv_heads ", groups, ": ", m_.n_head / groups,
                                           " query heads share each key/value head"));
    const int d = m_.HeadDim();
    if (qwen3) {
      Arg("head_dim", d);
      Arg("hidden_dim", m_.n_inner);
      Row("head_dim", absl::StrCat(d), kExact, "head_dim");
      if (!moe_) {
        Row("ffn", absl::StrCat(m_.n_inner), kExact, "hidden_dim");
      } else if (!info_.moe_width) {  // mixtral: intermediate_size is each expert's width
        Row("ffn", absl::StrCat(m_.n_inner), kExact,
            "moe_inter_dim: each expert's SwiGLU width (hidden_dim, a dense MLP's, is unused)");
      } else if (m_.dense_mlp_layers.empty()) {
        Row("ffn", absl::StrCat(m_.n_inner), kExact,
            "hidden_dim: the width of a dense MLP, which no layer of the config or the flavor "
            "has");
      } else {
        Row("ffn", absl::StrCat(m_.n_inner), kNotExpressible,
            "hidden_dim: the dense layers' width, but the flavor has no dense layer (see "
            "dense_layers)");
      }
      return;
    }
    if (d * m_.n_head == m_.n_embd) {
      Row("head_dim", absl::StrCat(d), kExact, "dim / n_heads (llama3's only head size)");
    } else {
      Row("head_dim", absl::StrCat(d), kNotExpressible,
          absl::StrCat("llama3's heads are dim / n_heads = ", m_.n_embd / m_.n_head,
                       " wide: a head size of its own needs the model's Attention in code"));
    }
    // llama3's FeedForward: int(2 * 4 * dim / 3), times ffn_dim_multiplier,
    // rounded up to multiple_of. multiple_of 1 and a multiplier half a unit
    // above the width make int() land on it exactly.
    const int base = 2 * (4 * m_.n_embd) / 3;
    Arg("multiple_of", 1);
    Arg("ffn_dim_multiplier", Py((m_.n_inner + 0.5) / base));
    Row("ffn", absl::StrCat(m_.n_inner), kExact,
        absl::StrCat("multiple_of 1, ffn_dim_multiplier (", m_.n_inner,
                     " + 0.5) / int(8 * dim / 3): llama3's MLP rounds that down to ", m_.n_inner));
  }

  void Normalization() {
    Arg("norm_eps", Py(m_.layer_norm_epsilon));
    if (info_.network != Network::kDecoder) {
      Row("normalization", "LayerNorm", kNotExpressible,
          "torchtitan's decoders normalize with RMSNorm, before each sublayer");
    } else if (info_.gemma_norm) {
      Row("normalization", "RMSNorm scaled by 1 + weight", kNotExpressible,
          "torchtitan's RMSNorm scales by its weight (nn.RMSNorm): the same function class, "
          "but a Gemma checkpoint's zero-centred weights need 1 added, and its init differs");
    } else {
      Row("normalization", "RMSNorm", kExact, "torchtitan's RMSNorm");
    }
    Row("norm_epsilon", Py(m_.layer_norm_epsilon), kExact, "norm_eps");
    // qwen3's model: q/k norms unless told (Qwen3ModelArgs' default is True).
    if (info_.qk_norm || moe_) Arg("qk_norm", PyBool(info_.qk_norm));
    if (info_.qk_norm) {
      Row("qk_norm", "RMSNorm over each head's q and k", kExact, "qk_norm");
    }
    if (info_.sandwich_norm) {
      Row("sandwich_norm", "norms after attention and after the MLP", kNotExpressible,
          "torchtitan's TransformerBlock has no norm on the attention's or the MLP's output: "
          "Gemma 2's post_attention_layernorm and post_feedforward_layernorm are missing");
    }
  }

  void Activation() {
    if (info_.network == Network::kDecoder && m_.hidden_act == "silu") {
      Row("activation", "silu, gated (SwiGLU)", kExact, "torchtitan's SwiGLU feed-forward");
      return;
    }
    Row("activation",
        info_.network == Network::kDecoder ? absl::StrCat(m_.hidden_act, ", gated (GeGLU)")
                                           : std::string("gelu"),
        kNotExpressible,
        "torchtitan's feed-forward is SwiGLU (silu): replace F.silu in the model's FeedForward "
        "in code");
  }

  void Biases() {
    const bool any =
        info_.network != Network::kDecoder || m_.attention_bias || m_.mlp_bias || info_.qkv_bias;
    if (!any) {
      Row("biases", "none", kExact, "torchtitan's linear layers have no bias");
      return;
    }
    Row("biases",
        info_.network != Network::kDecoder ? "every linear layer"
        : m_.attention_bias                ? "q, k, v, o"
        : info_.qkv_bias                   ? "q, k, v"
                                           : "the MLP's (gate, up, down)",
        kNotExpressible,
        "torchtitan's linear layers have no bias (bias=False): add them to the model's "
        "Attention or FeedForward in code");
  }

  void Positions(bool qwen3) {
    Arg("rope_theta", Py(m_.rope_theta));
    if (info_.network != Network::kDecoder) {
      Row("position_embedding", absl::StrCat("learned, ", m_.n_positions, " positions"),
          kNotExpressible, "torchtitan's decoders rotate queries and keys (rope) instead");
      return;
    }
    Row("position_embedding", absl::StrCat("rotary, base ", Py(m_.rope_theta)), kExact,
        qwen3 ? "rope_theta (halves rotated, as transformers)"
              : "rope_theta; llama3 rotates adjacent pairs (complex form) where transformers "
                "rotates halves: the same network up to an order of q's and k's output rows, "
                "which torchtitan's Hugging Face checkpoint converter permutes");
    if (info_.partial_rotary && m_.partial_rotary_factor != 1.0) {
      Row("partial_rotary", Py(m_.partial_rotary_factor), kNotExpressible,
          "torchtitan rotates every dimension of a head: rotate the first part only in code");
    }
    // Dynamic NTK scaling changes nothing up to max_position_embeddings.
    const bool unscaled_dynamic =
        m_.rope_type == "dynamic" && m_.RopeBase(seq_len_) == m_.rope_theta;
    const std::string dynamic_note =
        absl::StrCat("dynamic NTK scaling starts past max_position_embeddings (", m_.n_positions,
                     "): at seq_len ", seq_len_, " the frequencies are rope_theta's");
    if (qwen3) {
      if (unscaled_dynamic) {
        Row("rope_scaling", absl::StrCat("dynamic, factor ", Py(m_.rope_factor)), kExact,
            dynamic_note);
      } else if (m_.rope_type != "default") {
        Row("rope_scaling", absl::StrCat(m_.rope_type, ", factor ", Py(m_.rope_factor)),
            kNotExpressible,
            absl::StrCat("rope_type ", m_.rope_type,
                         ": torchtitan's qwen3 model has no rope scaling: scale in code"));
      }
      return;
    }
    // llama3 always applies Llama 3.1's scaling; factor 1 leaves every
    // frequency as it is.
    if (m_.rope_type == "llama3") {
      Arg("rope_scaling_args",
          absl::StrCat("RoPEScalingArgs(scaling_factor=", Py(m_.rope_factor),
                       ", low_freq_factor=", Py(m_.rope_low_freq_factor),
                       ", high_freq_factor=", Py(m_.rope_high_freq_factor),
                       ", original_max_position_embeddings=", m_.rope_original_max_positions, ")"));
      Row("rope_scaling",
          absl::StrCat("llama3, factor ", Py(m_.rope_factor), ", low_freq_factor ",
                       Py(m_.rope_low_freq_factor), ", high_freq_factor ",
                       Py(m_.rope_high_freq_factor), ", original ", m_.rope_original_max_positions),
          kExact, "rope_scaling_args");
      return;
    }
    Arg("rope_scaling_args", "RoPEScalingArgs(scaling_factor=1.0)");
    if (m_.rope_type == "linear") {
      Row("rope_scaling", absl::StrCat("linear, factor ", Py(m_.rope_factor)), kNotExpressible,
          "torchtitan's llama3 scales frequencies as Llama 3.1 only (scaling_factor 1 written: "
          "none): divide the frequencies by the factor in code");
    } else if (unscaled_dynamic) {
      Row("rope_scaling", absl::StrCat("dynamic, factor ", Py(m_.rope_factor)), kExact,
          absl::StrCat(dynamic_note, "; rope_scaling_args scaling_factor 1 (none)"));
    } else if (m_.rope_type != "default") {
      Row("rope_scaling", absl::StrCat(m_.rope_type, ", factor ", Py(m_.rope_factor)),
          kNotExpressible,
          absl::StrCat("rope_type ", m_.rope_type,
                       m_.rope_type == "dynamic"
                           ? absl::StrCat(" (at seq_len ", seq_len_, " the base grows to ",
                                          Py(m_.RopeBase(seq_len_)), ")")
                           : "",
                       ": torchtitan's llama3 scales frequencies as Llama 3.1 only "
                       "(scaling_factor 1 written: none): compute the frequencies in code"));
    } else {
      Row("rope_scaling", "none", kExact,
          "rope_scaling_args scaling_factor 1: llama3's Llama 3.1 scaling (on by default) off");
    }
  }

  void Embeddings(bool qwen3) {
    const bool tied = info_.network != Network::kDecoder || m_.tie_word_embeddings;
    if (qwen3) {
      Arg("enable_weight_tying", PyBool(tied));
      Row("embeddings", tied ? "tied: the output layer is the token embedding" : "untied", kExact,
          "enable_weight_tying");
    } else if (tied) {
      Row("embeddings", "tied: the output layer is the token embedding", kNotExpressible,
          "torchtitan's llama3 has an output layer of its own: tie output.weight to "
          "tok_embeddings.weight in code");
    } else {
      Row("embeddings", "untied", kExact, "llama3's output layer of its own");
    }
    if (info_.gemma_norm) {
      Row("embedding_scale", absl::StrCat("sqrt(hidden) = ", Py(std::sqrt(m_.n_embd))),
          kNotExpressible,
          "torchtitan does not scale the token embeddings: multiply their output by "
          "sqrt(dim) in code");
    }
  }

  void Others() {
    if (info_.network != Network::kDecoder) return;
    bool slides = false;
    for (int i = 0; i < m_.n_layer; ++i) slides = slides || m_.SlidingLayer(i);
    if (slides) {
      Row("sliding_window", absl::StrCat(m_.sliding_window), kNotExpressible,
          "torchtitan's attention masks are causal or per document, with no window: the "
          "layers that slide attend to the whole prefix");
    }
    if (info_.soft_capping && (m_.attn_logit_softcapping > 0 || m_.final_logit_softcapping > 0)) {
      Row("soft_capping",
          absl::StrCat("attention ", Py(m_.attn_logit_softcapping), ", logits ",
                       Py(m_.final_logit_softcapping)),
          kNotExpressible, "torchtitan caps no score: add cap * tanh(x / cap) in code");
    }
    if (moe_) {
      Experts();
      return;
    }
    const std::string flavor = m_.family == "qwen3" ? "qwen3" : "llama3";
    for (ArchitectureRow& row : UnwrittenModelRows(
             m_, absl::StrCat("the ", flavor, " flavor written has one dense MLP per layer"),
             absl::StrCat("the ", flavor, " flavor written has standard attention"))) {
      rows_.push_back(std::move(row));
    }
    if (info_.experts) {
      Row("experts", absl::StrCat(m_.num_local_experts, " experts, top ", m_.num_experts_per_tok),
          kNotExpressible,
          absl::StrCat("the export writes no torchtitan mixture of experts: the ", flavor,
                       " flavor written is dense, one MLP of width ", m_.n_inner, " per layer"));
    }
  }

  // Qwen3-MoE's and Mixtral's sparse MLP as torchtitan's MoE (models/moe/
  // moe.py), which computes what transformers' does: the router a linear
  // layer without bias, a softmax over every expert in fp32, the top k,
  // renormalised when route_norm; each chosen expert's SwiGLU output scaled
  // by its weight (score_before_experts False) and summed; no shared expert,
  // no balancing bias (load_balance_coeff None), no dropped token.
  void Experts() {
    const int width = m_.ExpertWidth();
    // torch._grouped_mm casts the experts' inputs and weights to bf16
    // (_run_experts_grouped_mm); the for-loop computes in the weights' dtype.
    const bool grouped_mm = precision_ != Precision::kFp32;
    Arg("moe_enabled", PyBool(true));
    Arg("moe_inter_dim", width);
    Arg("moe_args", absl::StrCat("MoEArgs(num_experts=", m_.num_local_experts,
                                 ", num_shared_experts=0, top_k=", m_.num_experts_per_tok,
                                 ", score_func=\"softmax\", route_norm=", PyBool(m_.norm_topk_prob),
                                 ", route_scale=1.0, gate_bias=False, score_before_experts=False, "
                                 "load_balance_coeff=None, use_grouped_mm=",
                                 PyBool(grouped_mm), ")"));
    Row("experts", absl::StrCat(m_.num_local_experts, " experts, top ", m_.num_experts_per_tok),
        kExact,
        absl::StrCat(
            "moe_enabled, moe_args num_experts, top_k, num_shared_experts 0: each layer's MLP is "
            "torchtitan's MoE of SwiGLU experts (w1, w3, w2: transformers' gate_up_proj and "
            "down_proj), every routed token computed (dropless); ",
            grouped_mm ? "use_grouped_mm True: torch._grouped_mm over the experts, in bf16 as the "
                         "strategy's precision"
                       : "use_grouped_mm False: one matmul per expert in fp32 (torchtitan's "
                         "grouped GEMM would compute the experts in bf16)"));
    if (info_.moe_width) Row("expert_width", absl::StrCat(width), kExact, "moe_inter_dim");
    Row("router",
        absl::StrCat("softmax, top ", m_.num_experts_per_tok,
                     m_.norm_topk_prob ? ", renormalised" : ", not renormalised"),
        kExact,
        absl::StrCat("score_func \"softmax\" over every expert in fp32, then top_k; route_norm ",
                     PyBool(m_.norm_topk_prob),
                     info_.norm_topk_key ? " (norm_topk_prob)" : " (Mixtral always renormalises)",
                     ", route_scale 1, gate_bias False; score_before_experts False: the weights "
                     "scale the experts' outputs, as transformers; load_balance_coeff None: no "
                     "auxiliary-loss-free expert bias, which transformers' model does not have"));
    if (m_.router_aux_loss_coef > 0) {
      Row("router_aux_loss", absl::StrCat("router_aux_loss_coef ", Py(m_.router_aux_loss_coef)),
          kNotExpressible,
          "torchtitan 0.2.2's MoE has no auxiliary load-balancing loss (its load_balance_coeff "
          "is a bias adjusted outside the loss): add router_aux_loss_coef times transformers' "
          "load_balancing_loss_func of the routers' logits to the loss in code");
    }
    if (!m_.dense_mlp_layers.empty()) {
      Row("dense_layers", absl::StrJoin(m_.dense_mlp_layers, ","), kNotExpressible,
          absl::StrCat("torchtitan's qwen3 model gives every layer experts (moe_enabled is one "
                       "flag for all): these layers get ",
                       m_.num_local_experts, " experts of width ", width,
                       " in place of a dense MLP of width ", m_.n_inner,
                       "; build them with FeedForward in code"));
    }
  }

  const ModelSpec& m_;
  const ModelFamilyInfo& info_;
  const int seq_len_;
  const Precision precision_;
  const bool moe_;  // the flavor has torchtitan's MoE (Experts())
  std::vector<ArchitectureRow>& rows_;
  std::string args_;
};

}  // namespace

TorchtitanModelFile TorchtitanModelModule(const FormatContext& c,
                                          std::vector<ArchitectureRow>& architecture) {
  return TorchtitanModel(c, architecture).Write();
}

}  // namespace autoaccel
