// The megatron format's model flags: the network Megatron-LM's training
// script builds, derived from the ModelSpec, and the architecture section,
// one row per feature saying whether those flags build what the config says
// (exact), something close (approximated), or cannot (not_expressible:
// Megatron has no flag for it; the note says what to do in code).
//
// Flag names and what they do are Megatron-LM core_v0.16.1's (the release of
// the megatron-core 0.16.1 wheel): the flags of
// megatron/training/arguments.py, many generated from TransformerConfig's
// fields, as core_transformer_config_from_args and gpt_builders.py hand them
// to GPTModel. That file is in no package: the names were checked against it
// by hand and export_test pins them; tests/export/check_megatron.py maps every
// family's export onto megatron.core's TransformerConfig and builds the
// GPTModel it describes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/formats.h"

namespace autoaccel {
namespace {

bool IsInteger(double v) { return v == std::floor(v) && std::fabs(v) < 1e15; }

// `v` as Megatron's argparse reads it: an integer without a decimal point or
// exponent (its type=int flags: --rotary-base), otherwise the shortest %g that
// reads back as `v` (absl::StrCat's six digits write 1e6 as "1e+06").
std::string Num(double v) {
  if (IsInteger(v)) return absl::StrCat(static_cast<int64_t>(v));
  char buffer[32];
  for (int digits : {6, 15, 17}) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  return buffer;
}

class MegatronModel {
 public:
  MegatronModel(const FormatContext& c, std::vector<std::string>& args,
                std::vector<ArchitectureRow>& rows)
      : m_(*c.in.model),
        info_(m_.Info()),
        seq_len_(c.in.seq_len),
        tensor_parallel_(c.s.tensor_parallel),
        args_(args),
        rows_(rows) {}

  // Appends the flags and the rows; returns the training script.
  std::string Write() {
    const bool bert = info_.network == Network::kBert;
    Network();
    Sizes();
    Attention();
    Normalization();
    Activation();
    Biases();
    Positions();
    Embeddings();
    if (info_.network == Network::kDecoder) {
      SlidingWindow();
      SoftCapping();
      Experts();
    }
    Dropout();
    return bert ? "pretrain_bert.py" : "pretrain_gpt.py";
  }

 private:
  static constexpr FidelityStatus kExact = FidelityStatus::kExact;
  static constexpr FidelityStatus kApproximated = FidelityStatus::kApproximated;
  static constexpr FidelityStatus kNotExpressible = FidelityStatus::kNotExpressible;

  void Flag(absl::string_view name) { args_.emplace_back(name); }
  template <typename T>
  void Flag(absl::string_view name, const T& value) {
    args_.push_back(absl::StrCat(name, "=", value));  // see megatron.cc
  }
  void Row(absl::string_view feature, std::string value, FidelityStatus status, std::string note) {
    rows_.push_back({std::string(feature), std::move(value), status, std::move(note)});
  }
  bool Decoder() const { return info_.network == Network::kDecoder; }

  void Network() {
    if (info_.network == Network::kBert) {
      // Hugging Face's BertForMaskedLM has no next-sentence head.
      Flag("--bert-no-binary-head");
      Row("network", "bert", kNotExpressible,
          "pretrain_bert.py's BertModel normalizes before each sublayer and after the last "
          "(pre-norm); Hugging Face's BERT normalizes the embeddings and after each residual add "
          "(post-norm), so every layer computes something else: train BERT with the "
          "hf-trainer, accelerate or deepspeed export");
      Row("token_types", absl::StrCat(m_.type_vocab_size), kNotExpressible,
          "BertModel has token-type embeddings only together with its next-sentence head and "
          "loss (--bert-no-binary-head drops both): add them in code");
      return;
    }
    Row("network", m_.family, kExact,
        info_.network == Network::kGpt2
            ? "pretrain_gpt.py: GPTModel, a pre-norm causal decoder like GPT-2's"
            : "pretrain_gpt.py: GPTModel, a pre-norm causal decoder with the features below");
  }

  void Sizes() {
    Flag("--num-layers", m_.n_layer);
    Flag("--hidden-size", m_.n_embd);
    Flag("--num-attention-heads", m_.n_head);
    Flag("--ffn-hidden-size", m_.n_inner);
    Row("sizes",
        absl::StrCat("layers ", m_.n_layer, ", hidden ", m_.n_embd, ", heads ", m_.n_head, ", ffn ",
                     m_.n_inner, info_.experts ? " per expert" : ""),
        kExact, "--num-layers, --hidden-size, --num-attention-heads, --ffn-hidden-size");
  }

  void Attention() {
    const int groups = m_.n_kv_head > 0 ? m_.n_kv_head : m_.n_head;
    if (groups != m_.n_head) {
      Flag("--group-query-attention");
      Flag("--num-query-groups", groups);
      Row("query_groups", absl::StrCat(groups), kExact,
          absl::StrCat("--group-query-attention --num-query-groups ", groups, ": ",
                       m_.n_head / groups, " query heads share each key/value head"));
    } else {
      Row("query_groups", absl::StrCat(groups), kExact,
          "one key/value head per query head (Megatron's default)");
    }
    const int d = m_.HeadDim();
    Flag("--kv-channels", d);
    Row("head_dim", absl::StrCat(d), kExact,
        absl::StrCat("--kv-channels ", d,
                     m_.n_head * d != m_.n_embd
                         ? absl::StrCat(": attention ", m_.n_head * d, " wide on a ", m_.n_embd,
                                        "-wide model")
                         : ""));
    if (info_.qk_norm) {
      Flag("--qk-layernorm");
      Row("qk_norm", "RMSNorm over each head's q and k", kExact,
          "--qk-layernorm: the --normalization norm over each head's query and key");
    }
  }

  void Normalization() {
    if (!Decoder()) {
      Row("normalization", "LayerNorm", kExact, "Megatron's default LayerNorm (with bias)");
    } else if (info_.gemma_norm) {
      Flag("--normalization", "RMSNorm");
      Flag("--apply-layernorm-1p");
      Row("normalization", "RMSNorm scaled by 1 + weight", kExact,
          "--normalization RMSNorm --apply-layernorm-1p (zero-centred gamma, Transformer "
          "Engine's norm; the torch norm of --transformer-impl local refuses it)");
    } else {
      Flag("--normalization", "RMSNorm");
      Row("normalization", "RMSNorm", kExact, "--normalization RMSNorm");
    }
    Flag("--norm-epsilon", Num(m_.layer_norm_epsilon));
    Row("norm_epsilon", Num(m_.layer_norm_epsilon), kExact, "--norm-epsilon");
    if (info_.sandwich_norm) {
      Row("sandwich_norm", "norms after attention and after the MLP", kNotExpressible,
          "Megatron's TransformerLayer has no norm on the attention's or the MLP's output: "
          "Gemma 2's post_attention_layernorm and post_feedforward_layernorm are missing; add "
          "them in a layer spec of your own (--spec)");
    }
  }

  void Activation() {
    if (info_.network == Network::kGpt2) {
      Row("activation", "gelu_new (tanh approximation)", kApproximated,
          "GPTModel's MLP uses the erf GELU (F.gelu), within 5e-4 of GPT-2's tanh "
          "approximation; --openai-gelu changes only the legacy models");
      return;
    }
    if (info_.network == Network::kBert) {
      Row("activation", "gelu", kExact, "Megatron's default GELU (erf)");
      return;
    }
    if (m_.hidden_act == "silu") {
      Flag("--swiglu");
      Row("activation", "silu, gated (SwiGLU)", kExact, "--swiglu");
      return;
    }
    Flag("--quick-geglu");
    Row("activation", absl::StrCat(m_.hidden_act, ", gated (GeGLU)"), kApproximated,
        "Megatron has no flag for a gated GELU: --quick-geglu gates with the quick GELU "
        "x*sigmoid(1.702x), up to 0.021 away from GELU; for the exact one set "
        "TransformerConfig.activation_func in code");
  }

  void Biases() {
    if (!Decoder()) {
      Row("biases", "every linear layer", kExact,
          "Megatron's default: a bias on every linear layer");
      return;
    }
    const bool attention = m_.attention_bias, mlp = m_.mlp_bias;
    if (attention && mlp) {
      Row("biases", "q, k, v, o and the MLP's", kExact,
          "Megatron's default: a bias on every linear layer");
      return;
    }
    Flag("--disable-bias-linear");
    const bool qkv = attention || info_.qkv_bias;
    if (qkv) Flag("--add-qkv-bias");
    if (attention) {
      Row("biases", "q, k, v, o", kNotExpressible,
          "--disable-bias-linear --add-qkv-bias: q, k and v get theirs, o does not; Megatron "
          "biases every linear layer or none but q, k, v: add o's bias in code");
    } else if (mlp) {
      Row("biases", "the MLP's (gate, up, down)", kNotExpressible,
          "--disable-bias-linear: the MLP's biases are missing; Megatron biases every linear "
          "layer or none but q, k, v: add them in code");
    } else if (qkv) {
      Row("biases", "q, k, v", kExact, "--disable-bias-linear --add-qkv-bias");
    } else {
      Row("biases", "none", kExact, "--disable-bias-linear");
    }
  }

  void Positions() {
    if (!Decoder()) {
      Flag("--position-embedding-type", "learned_absolute");
      Flag("--max-position-embeddings", m_.n_positions);
      Row("position_embedding", absl::StrCat("learned, ", m_.n_positions, " positions"), kExact,
          "--position-embedding-type learned_absolute --max-position-embeddings");
      return;
    }
    Flag("--position-embedding-type", "rope");
    // Only the length of rotary tables: no parameter depends on it.
    Flag("--max-position-embeddings", std::max(m_.n_positions, seq_len_));
    const std::string value = absl::StrCat("rotary, base ", Num(m_.rope_theta));
    if (IsInteger(m_.rope_theta)) {
      Flag("--rotary-base", Num(m_.rope_theta));
      Row("position_embedding", value, kExact,
          "--position-embedding-type rope --rotary-base (halves rotated, as transformers)");
    } else {
      const int64_t base = std::llround(m_.rope_theta);
      Flag("--rotary-base", base);
      Row("position_embedding", value, kApproximated,
          absl::StrCat("Megatron's --rotary-base is an integer: ", base));
    }
    if (info_.partial_rotary) {
      const double p = m_.partial_rotary_factor;
      if (p != 1.0) Flag("--rotary-percent", Num(p));
      Row("partial_rotary", Num(p), kExact,
          p != 1.0 ? "--rotary-percent: rotary on the first int(head_dim * p) dimensions"
                   : "every dimension rotates (Megatron's default --rotary-percent 1)");
    }
    RopeScaling();
  }

  void RopeScaling() {
    const double f = m_.rope_factor;
    if (m_.rope_type == "llama3") {
      Flag("--use-rope-scaling");
      Flag("--rope-scaling-factor", Num(f));
      const std::string value = absl::StrCat("llama3, factor ", Num(f), ", low_freq_factor ",
                                             Num(m_.rope_low_freq_factor), ", high_freq_factor ",
                                             Num(m_.rope_high_freq_factor), ", original ",
                                             m_.rope_original_max_positions);
      // Megatron's RotaryEmbedding fixes Llama 3.1's values, and
      // gpt_builders.py passes GPTModel the switch, not the factor.
      if (f == 8 && m_.rope_low_freq_factor == 1 && m_.rope_high_freq_factor == 4 &&
          m_.rope_original_max_positions == 8192) {
        Row("rope_scaling", value, kExact,
            "--use-rope-scaling: Megatron's RotaryEmbedding scales as Llama 3.1 (factor 8, "
            "low_freq_factor 1, high_freq_factor 4, 8192 original positions)");
      } else {
        Row("rope_scaling", value, kNotExpressible,
            "--use-rope-scaling builds Llama 3.1's scaling (factor 8, low_freq_factor 1, "
            "high_freq_factor 4, 8192 original positions) whatever --rope-scaling-factor says: "
            "pretrain_gpt.py does not pass the factor to GPTModel and RotaryEmbedding fixes the "
            "rest; build the rotary embedding with this model's values in code");
      }
    } else if (m_.rope_type == "linear") {
      const std::string value = absl::StrCat("linear, factor ", Num(f));
      if (IsInteger(f)) Flag("--rotary-seq-len-interpolation-factor", Num(f));
      Row("rope_scaling", value, kNotExpressible,
          IsInteger(f) ? "--rotary-seq-len-interpolation-factor, but pretrain_gpt.py does not pass "
                         "it to GPTModel (seq_len_interpolation_factor): pass it in code"
                       : "Megatron's --rotary-seq-len-interpolation-factor is an integer: pass "
                         "GPTModel seq_len_interpolation_factor in code");
    } else if (m_.rope_type == "dynamic") {
      const std::string value = absl::StrCat("dynamic, factor ", Num(f));
      const double base = m_.RopeBase(seq_len_);
      if (base == m_.rope_theta) {
        Row("rope_scaling", value, kExact,
            absl::StrCat("dynamic NTK scaling starts past max_position_embeddings (",
                         m_.n_positions, "): at seq_len ", seq_len_,
                         " the frequencies are rope_theta's, as --rotary-base builds"));
      } else {
        Row("rope_scaling", value, kNotExpressible,
            absl::StrCat("rope_type dynamic: Megatron's RotaryEmbedding has no dynamic NTK "
                         "scaling; at seq_len ",
                         seq_len_, " transformers rotates with base ", Num(base),
                         " (the grown base), which --rotary-base (an integer) cannot carry: set "
                         "the rotary embedding's base in code"));
      }
    } else if (m_.rope_type == "yarn") {
      Row("rope_scaling",
          absl::StrCat("yarn, factor ", Num(f), ", beta_fast ", Num(m_.rope_beta_fast),
                       ", beta_slow ", Num(m_.rope_beta_slow), ", original ",
                       m_.rope_original_max_positions, ", attention_factor ",
                       Num(m_.rope_attention_factor), m_.rope_truncate ? "" : ", not truncated"),
          kNotExpressible,
          "rope_type yarn: GPTModel builds YarnRotaryEmbedding for position_embedding_type "
          "'yarn' (non-MLA models too), but reads its settings from yarn_rotary_scaling_factor, "
          "yarn_original_max_position_embeddings, yarn_beta_fast, yarn_beta_slow, yarn_mscale, "
          "yarn_mscale_all_dim and yarn_correction_range_round_to_int, attributes "
          "TransformerConfig does not declare and pretrain_gpt.py flags do not set: set them on "
          "the config in code (the attention factor is Megatron's mscale ratio)");
    } else if (m_.rope_type == "longrope") {
      Row("rope_scaling",
          absl::StrCat("longrope, original ", m_.rope_original_max_positions, ", attention_factor ",
                       Num(m_.rope_attention_factor), ", ",
                       seq_len_ > m_.rope_original_max_positions ? "long" : "short",
                       " factors at seq_len ", seq_len_),
          kNotExpressible,
          "rope_type longrope: Megatron's rotary embeddings have no per-frequency (LongRoPE) "
          "factors nor an attention factor on cos and sin: divide the frequencies in code");
    }
  }

  void Embeddings() {
    const int v = m_.vocab_size;
    const int padded = (v + tensor_parallel_ - 1) / tensor_parallel_ * tensor_parallel_;
    Flag("--padded-vocab-size", padded);
    if (padded == v) {
      Row("vocab_size", absl::StrCat(v), kExact,
          "--padded-vocab-size: the config's rows (else Megatron pads the tokenizer's "
          "vocabulary to a multiple of --make-vocab-size-divisible-by 128 times tp)");
    } else {
      Row("vocab_size", absl::StrCat(v), kApproximated,
          absl::StrCat("--padded-vocab-size ", padded, ": Megatron splits the vocabulary over the ",
                       tensor_parallel_, " tensor-parallel ranks, so ", padded - v,
                       " rows no token uses are added (their logits enter the softmax)"));
    }
    if (Decoder() && !m_.tie_word_embeddings) {
      Flag("--untie-embeddings-and-output-weights");
      Row("embeddings", "untied", kExact, "--untie-embeddings-and-output-weights");
    } else {
      Row("embeddings", "tied: the output layer is the token embedding", kExact,
          "Megatron's default (shared)");
    }
    if (info_.gemma_norm) {
      Row("embedding_scale", absl::StrCat("sqrt(hidden) = ", Num(std::sqrt(m_.n_embd))),
          kNotExpressible,
          "Megatron has no flag to scale the token embeddings: multiply the embedding's output "
          "by sqrt(hidden_size) in your model provider");
    }
  }

  void SlidingWindow() {
    if (info_.sliding == SlidingLayers::kNone) return;
    std::vector<int> slides(m_.n_layer);  // 1: layer i slides
    for (int i = 0; i < m_.n_layer; ++i) slides[i] = m_.SlidingLayer(i) ? 1 : 0;
    const int sliding = std::count(slides.begin(), slides.end(), 1);
    if (sliding == 0) {
      Row("sliding_window", "none", kExact, "no layer slides");
      return;
    }
    const int w = m_.sliding_window;
    Flag("--window-size", absl::StrCat(w - 1, ",0"));
    std::string note = absl::StrCat(
        "--window-size ", w - 1, ",0: a position attends to itself and the ", w - 1, " before it");
    if (sliding < m_.n_layer) {
      // Megatron's integer N: layer l (from 1) slides unless N divides l.
      int every = 0;
      for (int n = 2; n <= m_.n_layer && every == 0; ++n) {
        bool fits = true;
        for (int i = 0; i < m_.n_layer; ++i) fits = fits && slides[i] == ((i + 1) % n != 0 ? 1 : 0);
        if (fits) every = n;
      }
      std::string skip;
      if (every > 0) {
        skip = absl::StrCat(every);
      } else {
        skip = absl::StrCat("[", absl::StrJoin(slides, ","), "]");
      }
      Flag("--window-attn-skip-freq", skip);
      absl::StrAppend(&note, "; --window-attn-skip-freq ", skip, ": the config's sliding layers");
    }
    Row("sliding_window",
        absl::StrCat(w, " on ",
                     sliding == m_.n_layer ? "every layer"
                                           : absl::StrCat(sliding, " of ", m_.n_layer, " layers")),
        kExact, note);
  }

  void SoftCapping() {
    if (!info_.soft_capping) return;
    const double attn = m_.attn_logit_softcapping, logits = m_.final_logit_softcapping;
    if (attn > 0) {
      Row("attn_logit_softcapping", Num(attn), kNotExpressible,
          "Megatron's attention has no soft-capping (cap * tanh(score / cap) before the "
          "softmax): apply it in a core attention of your own (--spec)");
    } else {
      Row("attn_logit_softcapping", "none", kExact, "");
    }
    if (logits > 0) {
      Row("final_logit_softcapping", Num(logits), kNotExpressible,
          "GPTModel does not cap its logits (cap * tanh(logit / cap)): cap them before the loss "
          "in your model provider");
    } else {
      Row("final_logit_softcapping", "none", kExact, "");
    }
    const double scalar = m_.query_pre_attn_scalar > 0 ? m_.query_pre_attn_scalar : m_.HeadDim();
    if (scalar == m_.HeadDim()) {
      Row("query_pre_attn_scalar", Num(scalar), kExact,
          "scores scaled by 1/sqrt(--kv-channels), Megatron's default");
    } else {
      Row("query_pre_attn_scalar", Num(scalar), kNotExpressible,
          absl::StrCat("Megatron scales scores by 1/sqrt(--kv-channels ", m_.HeadDim(),
                       ") and TransformerConfig.softmax_scale has no flag: set it to 1/sqrt(",
                       Num(scalar), ") in code"));
    }
  }

  void Experts() {
    for (ArchitectureRow& row : UnwrittenModelRows(
             m_,
             absl::StrCat("the flags build experts of --ffn-hidden-size ", m_.n_inner,
                          " on every layer, routed by a renormalised softmax top-k; set "
                          "Megatron's MoE configuration for it in code"),
             "the flags build standard attention of --kv-channels heads; set Megatron's "
             "latent-attention configuration in code")) {
      rows_.push_back(std::move(row));
    }
    if (!info_.experts) return;
    Flag("--num-experts", m_.num_local_experts);
    Flag("--moe-router-topk", m_.num_experts_per_tok);
    Row("experts",
        absl::StrCat(m_.num_local_experts, " experts, top ", m_.num_experts_per_tok, " per token"),
        kExact,
        absl::StrCat("--num-experts --moe-router-topk: every layer, softmax over the top-k router "
                     "logits (Mixtral's renormalized top-k), no token dropped",
                     m_.router_aux_loss_coef > 0
                         ? ""
                         : ", no load-balancing loss (the default --moe-aux-loss-coeff 0)",
                     "; the rows above say where the model differs"));
    RouterLoss();
  }

  // transformers' auxiliary loss pools the counts and probabilities of
  // every expert layer, N = tokens x expert layers: coef * E * sum_e C_e P_e
  // / N^2. Megatron's aux_loss is per layer, coeff * E * sum_e C_e P_e /
  // (T^2 * topk), summed over the layers; with the layers' counts alike both
  // give each layer's probabilities the same gradient when coeff = coef *
  // topk / (expert layers).
  void RouterLoss() {
    if (m_.router_aux_loss_coef <= 0) return;
    int expert_layers = 0;
    for (int layer = 0; layer < m_.n_layer; ++layer) expert_layers += m_.ExpertLayer(layer);
    const double coeff = m_.router_aux_loss_coef * m_.num_experts_per_tok / expert_layers;
    Flag("--moe-router-load-balancing-type", "aux_loss");
    Flag("--moe-aux-loss-coeff", coeff);
    Row("router_aux_loss", absl::StrCat("router_aux_loss_coef ", m_.router_aux_loss_coef),
        kApproximated,
        absl::StrCat("--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff ", coeff,
                     " (router_aux_loss_coef x topk / ", expert_layers,
                     " expert layers): Megatron adds one load-balancing loss per layer where "
                     "transformers pools the router counts of every layer into one; the "
                     "gradients agree when the layers route alike"));
  }

  void Dropout() {
    if (Decoder()) {
      Flag("--hidden-dropout", 0);
      Flag("--attention-dropout", 0);
      Row("dropout", "0", kExact,
          "--hidden-dropout 0 --attention-dropout 0 (Megatron's defaults are 0.1): Llama-style "
          "decoders have no hidden dropout and default to no attention dropout; a config's "
          "attention_dropout is not read");
      return;
    }
    Row("dropout", "0.1 (the family's default)", kApproximated,
        "Megatron's default --hidden-dropout 0.1 --attention-dropout 0.1, the family's "
        "defaults; the config's own dropout probabilities are not read: set these flags to them");
  }

  const ModelSpec& m_;
  const ModelFamilyInfo& info_;
  const int seq_len_;
  const int tensor_parallel_;
  std::vector<std::string>& args_;
  std::vector<ArchitectureRow>& rows_;
};

}  // namespace

std::string MegatronModelFlags(const FormatContext& c, std::vector<std::string>& args,
                               std::vector<ArchitectureRow>& architecture) {
  return MegatronModel(c, args, architecture).Write();
}

}  // namespace autoaccel
