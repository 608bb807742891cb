// Model description shared by the coordinator (validation, cost figures) and
// the trial runner (which builds the network from it).
#ifndef AUTOACCEL_SEARCH_MODEL_H_
#define AUTOACCEL_SEARCH_MODEL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

enum class ModelFamily {
  kGpt2,     // GPT-2 decoder: learned positions, LayerNorm, GELU MLP, tied LM head
  kLlama,    // Llama decoder: RMSNorm, rotary positions, SwiGLU, grouped-query attention
  kBert,     // BERT encoder with its masked-LM head (tied decoder)
  kMixtral,  // Llama with a sparse mixture-of-experts MLP (top-k router)
  // The user's own module, saved with torch.jit.save; its forward takes the
  // inputs of an input spec (search/input_spec.h) and returns the loss.
  kTorchScript,
};

// "gpt2", "llama", "bert", "mixtral" — the names Hugging Face uses as
// model_type — and "torchscript"; the names KnownModelFamilies() lists.
absl::string_view ModelFamilyName(ModelFamily family);
// INVALID_ARGUMENT "model: unknown family 'foo' (allowed: gpt2, llama, bert, mixtral)".
absl::StatusOr<ModelFamily> ParseModelFamily(absl::string_view name);

// A transformer as described by a Hugging Face config.json.
//
// The dimensions every family has keep GPT-2's field names (the first family
// this project supported); the config key each one is read from depends on
// the family:
//
//   field               gpt2                 llama / mixtral           bert
//   n_layer             n_layer              num_hidden_layers         num_hidden_layers
//   n_embd              n_embd               hidden_size               hidden_size
//   n_head              n_head               num_attention_heads       num_attention_heads
//   vocab_size          vocab_size           vocab_size                vocab_size
//   n_positions         n_positions          max_position_embeddings   max_position_embeddings
//   n_inner             n_inner (4*n_embd)   intermediate_size         intermediate_size
//   layer_norm_epsilon  layer_norm_epsilon   rms_norm_eps              layer_norm_eps
//
// Every family has head size n_embd / n_head (a config whose head_dim says
// otherwise is rejected) and no dropout: the trial runner measures training
// speed, and configs' dropout probabilities are ignored.
struct ModelSpec {
  std::string family;  // ModelFamilyName() of one of the families
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int vocab_size = 0;
  int n_positions = 0;
  int n_inner = 0;  // MLP width (per expert for mixtral)
  double layer_norm_epsilon = 1e-5;

  // llama, mixtral: key/value heads of grouped-query attention
  // (num_key_value_heads); must divide n_head. Unused by gpt2 and bert.
  int n_kv_head = 0;
  // llama, mixtral: base of the rotary embedding's frequencies.
  double rope_theta = 10000.0;
  // llama, mixtral: LM head shares the token embedding. (gpt2 and bert always
  // tie their output projection to the token embedding.)
  bool tie_word_embeddings = false;
  // bert: number of token types (segment embeddings).
  int type_vocab_size = 0;
  // mixtral: experts per layer, and experts each token is routed to.
  int num_local_experts = 0;
  int num_experts_per_tok = 0;

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

  // The parsed family; INVALID_ARGUMENT when `family` is not a known one.
  absl::StatusOr<ModelFamily> Family() const { return ParseModelFamily(family); }

  // True for the decoders (next-token prediction with a causal mask); false
  // for bert (bidirectional, masked-LM).
  bool IsCausal() const { return family != "bert"; }
  bool IsTorchScript() const { return family == "torchscript"; }

  // Checks what ModelSpecFromJson checks, for a spec built by hand: a known
  // family, positive sizes, heads dividing n_embd, n_kv_head dividing n_head,
  // num_experts_per_tok <= num_local_experts. INVALID_ARGUMENT names the
  // family's config key, e.g. "model_config.num_key_value_heads: must divide
  // num_attention_heads (12), got 5".
  absl::Status Validate() const;

  // The config key of the maximum sequence length: "n_positions" (gpt2) or
  // "max_position_embeddings".
  absl::string_view MaxPositionsKey() const;

  // Number of trainable parameters, counting tied weights once; equals
  // transformers' num_parameters() for GPT2LMHeadModel, LlamaForCausalLM,
  // BertForMaskedLM (no pooler) and MixtralForCausalLM of the same config.
  int64_t ParameterCount() const;

  // Model FLOPs of one training step (forward + backward = 3x forward) per
  // token at sequence length `seq_len`:
  //   6 * N_matmul + attention
  // N_matmul counts the weights that take part in a matrix multiply for a
  // token: every transformer-block weight (for mixtral only the router and
  // the num_experts_per_tok experts a token is routed to, not all
  // num_local_experts), bert's MLM transform, and the LM head / MLM decoder
  // (vocab_size * n_embd, tied or not); not embeddings, norms or biases.
  // Attention's QK^T and AV products are 4 * seq_len * n_embd per token and
  // layer forward, times 3 for forward + backward: 12 * n_layer * n_embd *
  // seq_len, halved for the causal families because masking leaves half the
  // score matrix useful (PaLM, appendix B). Grouped-query attention does not
  // change it (the products are per query head). Recomputation is not
  // counted: this is model FLOPs, as MFU is defined.
  double TrainingFlopsPerToken(int seq_len) const;

  // The normalized config that the trial runner reads back: "model_type" plus
  // the family's Hugging Face keys for every field above (e.g. llama:
  // hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
  // num_key_value_heads, vocab_size, max_position_embeddings, rms_norm_eps,
  // rope_theta, tie_word_embeddings). ModelSpecFromJson(family, it) gives the
  // same spec back.
  nlohmann::json ToConfigJson() const;
};

// 64-bit FNV-1a of `bytes`: stable across processes and builds. Pass the
// hash of earlier bytes as `hash` to continue it over more.
inline constexpr uint64_t kFnv1a64Offset = 1469598103934665603ULL;
uint64_t Fnv1a64(absl::string_view bytes, uint64_t hash = kFnv1a64Offset);

// "fnv1a64:<16 hex digits>": a stable digest of a file's bytes (FNV-1a, 64
// bits; tells files apart, is no defence against a forger).
std::string ContentDigest(absl::string_view bytes);

// Lists the families this build understands: gpt2, llama, bert, mixtral,
// torchscript.
const std::vector<std::string>& KnownModelFamilies();

// Parses a Hugging Face style config.json text for `family`.
// Errors are INVALID_ARGUMENT and name the field, e.g.
//   "model_config.n_head: missing", "model: unknown family 'foo' (allowed: gpt2, ...)",
//   "model_config.num_key_value_heads: must divide num_attention_heads (4), got 3",
//   "model_config.model_type: 'gpt2' does not match model 'llama'".
// Keys the engine does not model are checked where ignoring them would build
// a different network (hidden_act, head_dim, attention_bias, mlp_bias, rope
// scaling, bert's position_embedding_type, tie_word_embeddings false for gpt2
// and bert) and otherwise ignored (dropout, token ids, initializer_range, ...).
// Defaults follow transformers' config classes where a key is absent.
absl::StatusOr<ModelSpec> ParseModelConfig(absl::string_view family, absl::string_view config_json);
absl::StatusOr<ModelSpec> ModelSpecFromJson(absl::string_view family, const nlohmann::json& config);

// Splits "key=value" at the first '='. INVALID_ARGUMENT "override: expected
// key=value, got '...'" when there is no '=' or the key is empty.
absl::StatusOr<std::pair<std::string, std::string>> ParseOverride(absl::string_view text);

// Applies overrides to a config before it is parsed (like transformers'
// override of a config.json: fewer layers, dropout off), in order, later
// ones winning. A value that parses as JSON is used as that JSON value ("2",
// "0.0", "true", "null", "[1,2]", "\"x\""); anything else is taken as a
// string ("silu"). A key may name a nested field with dots
// ("rope_parameters.rope_theta=500000"); missing objects on the path are
// created. INVALID_ARGUMENT ("override[1]: ...", index 0-based) for an empty
// key or path segment, or a path through a value that is not an object;
// `config` must be a JSON object (INVALID_ARGUMENT otherwise). On error
// `config` is left unchanged.
absl::Status ApplyOverrides(const std::vector<std::pair<std::string, std::string>>& kv,
                            nlohmann::json* config);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_MODEL_H_
