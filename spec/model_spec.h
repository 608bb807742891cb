// Model description shared by the coordinator (validation, cost figures) and
// the trial runner (which builds the network from it). ("Model" in the
// search's sense: engine/model.h is the network built from it.)
//
// model_spec.cc implements the checks and the parameter and FLOP counts;
// model_config.cc reading and writing a Hugging Face config.json
// (ParseModelConfig, ModelSpecFromJson, ToConfigJson). Edits of a config
// before it is read are config_override.h's. Pure functions and values; any
// thread.
#ifndef AUTOACCEL_SPEC_MODEL_SPEC_H_
#define AUTOACCEL_SPEC_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "spec/model_families.h"

namespace autoaccel {

// The family of `name` (a model_type: "gpt2", "llama", "mistral", "qwen2",
// ...; KnownModelFamilies() lists them), its row of the family table
// (spec/model_families.h). INVALID_ARGUMENT
//   "model: unknown family 'falcon' (supported: gpt2, llama, ...); use a
//    TorchScript module (--model torchscript) for other architectures".
absl::StatusOr<const ModelFamilyInfo*> ParseModelFamily(absl::string_view name);

// A transformer as described by a Hugging Face config.json.
//
// The dimensions every family has keep GPT-2's field names (the first family
// this project supported); the config key each one is read from depends on
// the network:
//
//   field               gpt2                 decoders (llama, ...)     bert
//   n_layer             n_layer              num_hidden_layers         num_hidden_layers
//   n_embd              n_embd               hidden_size               hidden_size
//   n_head              n_head               num_attention_heads       num_attention_heads
//   vocab_size          vocab_size           vocab_size                vocab_size
//   n_positions         n_positions          max_position_embeddings   max_position_embeddings
//   n_inner             n_inner (4*n_embd)   intermediate_size         intermediate_size
//   layer_norm_epsilon  layer_norm_epsilon   rms_norm_eps              layer_norm_eps
//
// The decoders (Network::kDecoder: llama, mistral, mixtral, qwen2, qwen3,
// phi3, gemma, gemma2, qwen3_moe, deepseek_v3, gpt_oss) are one network whose differences are the
// features of their family's row (model_families.h) and the fields below. No family has dropout:
// the trial runner measures training speed, and configs' dropout probabilities are ignored.
struct ModelSpec {
  std::string family;  // a name KnownModelFamilies() lists
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int vocab_size = 0;
  int n_positions = 0;
  int n_inner = 0;  // MLP width (per expert for mixtral; ExpertWidth())
  double layer_norm_epsilon = 1e-5;

  // Decoders: key/value heads of grouped-query attention
  // (num_key_value_heads); must divide n_head. gpt2 and bert: n_head.
  int n_kv_head = 0;
  // Decoders: the size of one attention head (head_dim); 0 means n_embd /
  // n_head (HeadDim()). Query width n_head * HeadDim() need not be n_embd.
  int head_dim = 0;
  // Decoders: the gated MLP's activation (hidden_act, or gemma2's
  // hidden_activation): "silu", "gelu" (erf) or "gelu_pytorch_tanh".
  std::string hidden_act = "silu";
  // Decoders whose row has attention_bias_key / mlp_bias_key: biases on the
  // q, k, v and o projections / on gate, up and down. (qwen2's q, k, v
  // biases are its row's qkv_bias, not this.)
  bool attention_bias = false;
  bool mlp_bias = false;
  // Decoders: rotary embedding. Frequencies theta^(-2i/d) over the first
  // d = HeadDim() * partial_rotary_factor dimensions of each head, scaled by
  // rope_type as transformers 5.23's modeling_rope_utils.py does (the engine
  // computes them in engine/llama.cc; the keys each type reads are
  // model_spec_internal.h's kRopeTypes):
  //   "default";
  //   "linear": frequencies / rope_factor;
  //   "dynamic" (dynamic NTK): a forward of T > n_positions tokens uses theta
  //     * (rope_factor * T / n_positions - (rope_factor - 1))^(d / (d - 2));
  //     T <= n_positions the default frequencies (MaxSeqLen());
  //   "llama3" (Llama 3.1): wavelengths above original_max / low_freq_factor
  //     divided by rope_factor, below original_max / high_freq_factor kept,
  //     smoothly interpolated between;
  //   "yarn": frequencies ramped from extrapolated (theta's) to interpolated
  //     (/ rope_factor) between the dimensions that turn beta_fast and
  //     beta_slow times over original_max positions (truncate: the ramp's
  //     ends rounded out to whole dimensions);
  //   "longrope" (Phi-3 128k): frequency i divided by rope_long_factor[i]
  //     when the forward's T > original_max, else by rope_short_factor[i].
  // rope_original_max_positions is original_max_position_embeddings; yarn
  // and longrope multiply cos and sin by rope_attention_factor (the
  // config's attention_factor, or the default transformers derives from
  // factor, mscale and mscale_all_dim, resolved when the config is read).
  double rope_theta = 10000.0;
  std::string rope_type = "default";
  double rope_factor = 1.0;
  double rope_low_freq_factor = 0;
  double rope_high_freq_factor = 0;
  int rope_original_max_positions = 0;
  double rope_beta_fast = 32, rope_beta_slow = 1;           // yarn
  bool rope_truncate = true;                                // yarn
  double rope_attention_factor = 1.0;                       // yarn, longrope
  std::vector<double> rope_short_factor, rope_long_factor;  // longrope: d / 2 each
  double partial_rotary_factor = 1.0;                       // phi3 only
  // Decoders: LM head shares the token embedding. (gpt2 and bert always
  // tie their output projection to the token embedding.)
  bool tie_word_embeddings = false;
  // Decoders: sliding-window attention. A layer that slides lets position t
  // attend to positions t - sliding_window + 1 ... t (transformers'
  // convention). sliding_window 0: no layer slides. layer_types empty: every
  // layer slides (when sliding_window > 0); else one entry per layer,
  // "full_attention" or "sliding_attention".
  int sliding_window = 0;
  std::vector<std::string> layer_types;
  // gemma2: tanh soft-capping of attention scores (cap * tanh(s / cap)) and
  // of the final logits; 0 for none. query_pre_attn_scalar: scores are
  // scaled by its inverse square root (0: HeadDim()).
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  double query_pre_attn_scalar = 0;
  // bert: number of token types (segment embeddings).
  int type_vocab_size = 0;
  // Mixture-of-experts decoders (the row's experts: mixtral, qwen3_moe,
  // deepseek_v3): experts per layer (num_local_experts, num_experts or
  // n_routed_experts), and experts each token is routed to.
  int num_local_experts = 0;
  int num_experts_per_tok = 0;
  // qwen3_moe, deepseek_v3: each expert's width (moe_intermediate_size);
  // n_inner is then the dense layers' width. 0: n_inner (mixtral).
  int moe_intermediate_size = 0;
  // The layers whose MLP is dense (width n_inner) rather than experts,
  // ascending: qwen3_moe's mlp_only_layers and the layers its
  // decoder_sparse_step skips; deepseek_v3's first first_k_dense_replace.
  std::vector<int> dense_mlp_layers;
  // Whether the chosen experts' weights are renormalised to sum to 1
  // (norm_topk_prob; mixtral always).
  bool norm_topk_prob = true;
  // > 0: the training loss adds this times transformers' auxiliary
  // load-balancing loss (output_router_logits true with router_aux_loss_coef,
  // families whose row has router_aux_loss; engine/router_loss.h). 0: none.
  double router_aux_loss_coef = 0;
  // deepseek_v3's router (MoeRouter::kGroupedSigmoid): experts in n_group
  // groups, a token's experts chosen from its topk_group best groups; the
  // weights multiplied by routed_scaling_factor. Its shared experts:
  // n_shared_experts x moe_intermediate_size wide dense MLP.
  int n_group = 0;
  int topk_group = 0;
  double routed_scaling_factor = 1.0;
  int n_shared_experts = 0;
  // gpt_oss's clamped SwiGLU experts (the row's clamped_swiglu): the
  // sigmoid's gain and the clamp; 0 for every other family.
  double swiglu_alpha = 0;
  double swiglu_limit = 0;
  // deepseek_v3: multi-head latent attention (engine/latent_attention.h).
  // Queries from q_proj, or through a q_lora_rank bottleneck (0: none);
  // keys and values from a shared kv_lora_rank latent; per head,
  // qk_nope_head_dim + qk_rope_head_dim query/key dimensions (rotary on the
  // last qk_rope_head_dim, interleaved pairs when rope_interleave) and
  // v_head_dim value dimensions. head_dim is unused (RotaryDim() is
  // qk_rope_head_dim). rope_mscale_all_dim: yarn's mscale_all_dim, which
  // scales the softmax by YarnMscale(factor, mscale_all_dim)^2 (0: not).
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool rope_interleave = false;
  double rope_mscale_all_dim = 0;

  // torchscript: the model is a file the coordinator does not look inside.
  // The spec holds its input spec (canonical text), a digest of its bytes
  // (ContentDigest) and its size, so that equal files give equal
  // signatures. The transformer fields above stay 0, except n_positions,
  // which is kTorchScriptMaxSeqLen (no limit known). ParameterCount() and
  // TrainingFlopsPerToken() are 0: the trial runner counts the loaded
  // module's parameters itself.
  std::string input_spec;
  std::string script_digest;
  int64_t script_bytes = 0;
  static constexpr int kTorchScriptMaxSeqLen = 1 << 20;

  // The family's row; INVALID_ARGUMENT when `family` is not a known one.
  absl::StatusOr<const ModelFamilyInfo*> Family() const { return ParseModelFamily(family); }
  // The family's row. REQUIRES: `family` is known (Validate() is OK).
  const ModelFamilyInfo& Info() const;
  // Shorthands for Info().network.
  bool IsDecoder() const;
  // True for the decoders and gpt2 (next-token prediction with a causal
  // mask); false for bert (bidirectional, masked-LM).
  bool IsCausal() const { return family != "bert"; }
  bool IsTorchScript() const { return family == "torchscript"; }

  // The longest sequence the network is defined for: n_positions, except a
  // decoder with rope_type "dynamic", whose scaling is what it computes past
  // max_position_embeddings (kTorchScriptMaxSeqLen: no limit known).
  int MaxSeqLen() const;
  // The base of the rotary frequencies in a forward of `seq_len` tokens:
  // rope_theta, or dynamic's grown base (see rope_type) past n_positions.
  double RopeBase(int64_t seq_len) const;
  // The rotary size d: HeadDim() * partial_rotary_factor (latent
  // attention: qk_rope_head_dim).
  int RotaryDim() const {
    return qk_rope_head_dim > 0 ? qk_rope_head_dim
                                : static_cast<int>(HeadDim() * partial_rotary_factor);
  }
  // head_dim, or n_embd / n_head when it is 0.
  int HeadDim() const { return head_dim > 0 ? head_dim : (n_head > 0 ? n_embd / n_head : 0); }
  // A head's query/key and value sizes: HeadDim() both, or latent
  // attention's qk_nope_head_dim + qk_rope_head_dim and v_head_dim.
  int QkHeadDim() const {
    return qk_rope_head_dim > 0 ? qk_nope_head_dim + qk_rope_head_dim : HeadDim();
  }
  int VHeadDim() const { return v_head_dim > 0 ? v_head_dim : HeadDim(); }
  // Whether the sdpa attention kernel computes this model's attention: not
  // with soft-capped scores (gemma2) nor attention sinks (gpt_oss), which
  // only the math kernel computes (the "attention_kernel" rule).
  bool SdpaComputes() const;
  // Mixture-of-experts decoders: whether layer `layer` has experts (not one
  // of dense_mlp_layers); false for every other family.
  bool ExpertLayer(int layer) const;
  // The experts' width: moe_intermediate_size, or n_inner when it is 0.
  int ExpertWidth() const { return moe_intermediate_size > 0 ? moe_intermediate_size : n_inner; }
  // Whether layer `layer` uses sliding-window attention (see sliding_window).
  bool SlidingLayer(int layer) const;

  // Checks what ModelSpecFromJson checks, for a spec built by hand: a known
  // family, positive sizes, heads dividing n_embd (unless head_dim is
  // given), n_kv_head dividing n_head, an even rotary size,
  // num_experts_per_tok <= num_local_experts, features only where the
  // family's row has them, layer_types of n_layer known entries.
  // INVALID_ARGUMENT names the family's config key, e.g.
  // "model_config.num_key_value_heads: must divide num_attention_heads (12), got 5".
  absl::Status Validate() const;

  // The config key of the maximum sequence length: "n_positions" (gpt2) or
  // "max_position_embeddings".
  absl::string_view MaxPositionsKey() const;

  // Number of trainable parameters, counting tied weights once; equals
  // transformers' num_parameters() for GPT2LMHeadModel, BertForMaskedLM (no
  // pooler) and the decoders' *ForCausalLM of the same config (buffers such
  // as deepseek_v3's e_score_correction_bias are not parameters).
  int64_t ParameterCount() const;
  // The part of ParameterCount() in routed experts (what expert parallelism
  // spreads over ranks): num_local_experts SwiGLU MLPs of ExpertWidth() per
  // expert layer (not the shared experts; with their biases, gpt_oss); 0
  // for a model without experts.
  int64_t ExpertParameterCount() const;
  // The parameters one token's forward uses: ParameterCount() less the
  // experts it is not routed to (num_local_experts - num_experts_per_tok
  // per expert layer); ParameterCount() for dense models. (The "active
  // parameters" model cards quote: 3.3B of Qwen3-30B-A3B, 37B of DeepSeek-V3.)
  int64_t ActiveParameterCount() const;

  // Model FLOPs of one training step (forward + backward = 3x forward) per
  // token at sequence length `seq_len`:
  //   6 * N_matmul + attention
  // N_matmul counts the weights that take part in a matrix multiply for a
  // token: every transformer-block weight (for mixtral only the router and
  // the num_experts_per_tok experts a token is routed to, not all
  // num_local_experts, and deepseek_v3's shared experts), bert's MLM
  // transform, and the LM head / MLM decoder (vocab_size * n_embd, tied or
  // not); not embeddings, norms or biases. Attention's QK^T and AV products
  // are 2 * K * (Aqk + Av) per token and layer forward, times 3 for forward
  // + backward, where Aqk = n_head * QkHeadDim() and Av = n_head *
  // VHeadDim() are the attention widths (both n_head * HeadDim() but for
  // latent attention; n_embd for gpt2 and bert) and K the keys a query
  // attends to on average: seq_len for bert; seq_len / 2 for a causal layer
  // (masking leaves half the score matrix useful; PaLM, appendix B); for a
  // sliding layer with window W < seq_len, W - W^2 / (2 seq_len) (the same
  // count with the positions outside the window left out). Grouped-query
  // attention does not change it (the products are per query head).
  // Recomputation is not counted: this is model FLOPs, as MFU is defined.
  double TrainingFlopsPerToken(int seq_len) const;

  // The keys a query attends to on average in layer `layer` at `seq_len`
  // (K above).
  double AttendedKeys(int layer, int seq_len) const;

  // The normalized config that the trial runner reads back: "model_type" plus
  // the family's Hugging Face keys for every field above (e.g. llama:
  // hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
  // num_key_value_heads, vocab_size, max_position_embeddings, rms_norm_eps,
  // rope_theta, tie_word_embeddings). A decoder feature's key is written
  // when reading the config without it would give another value, so a
  // Llama config without the newer features normalizes as it always did.
  // ModelSpecFromJson(family, it) gives the same spec back.
  nlohmann::json ToConfigJson() const;
};

// A 64-bit FNV-1a-style hash of `bytes`: stable across processes and builds,
// for signatures and test noise, never for trust (its offset basis is not
// FNV's standard one, kept so that stored signatures stay valid; files are
// told apart by ContentDigest, common/content_digest.h). Pass the hash of
// earlier bytes as `hash` to continue it over more.
inline constexpr uint64_t kFnv1a64Offset = 1469598103934665603ULL;
uint64_t Fnv1a64(absl::string_view bytes, uint64_t hash = kFnv1a64Offset);

// Lists the families this build understands, in table order (gpt2, llama,
// bert, mixtral, mistral, qwen2, qwen3, phi3, gemma, gemma2, qwen3_moe,
// deepseek_v3, gpt_oss, torchscript).
const std::vector<std::string>& KnownModelFamilies();

// Parses a Hugging Face style config.json text for `family`.
// Errors are INVALID_ARGUMENT and name the field, e.g.
//   "model_config.n_head: missing",
//   "model: unknown family 'foo' (supported: gpt2, ...); use a TorchScript module ...",
//   "model_config.num_key_value_heads: must divide num_attention_heads (4), got 3",
//   "model_config.model_type: 'qwen2' does not match model 'llama' (use --model qwen2)",
//   "model_config.model_type: 'falcon' is not supported (supported: ...); use a
//    TorchScript module (--model torchscript) for other architectures".
// The config must be `family`'s own: its "architectures" (when present) must
// name the family's transformers classes, and a decoder's config must not
// set (to anything but null or false) a key that only other decoder
// families read (DecoderFeatureKeys: e.g. use_sliding_window for llama),
// so that a model_type changed by hand never silently builds another
// architecture. Keys the engine does not model are checked where ignoring
// them would build a different network (activations, rope types, biases,
// bidirectional attention, bert's position_embedding_type,
// tie_word_embeddings false for gpt2 and bert) and otherwise ignored
// (dropout, token ids, initializer_range, ...). Defaults follow
// transformers' config classes where a key is absent (the family's row).
absl::StatusOr<ModelSpec> ParseModelConfig(absl::string_view family, absl::string_view config_json);
absl::StatusOr<ModelSpec> ModelSpecFromJson(absl::string_view family, const nlohmann::json& config);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_MODEL_SPEC_H_
