// Tiny model and trial specs shared by the engine tests; no LibTorch, so that
// tests driving the trial runner as a process can use them too.
#ifndef AUTOACCEL_TESTS_MODEL_TEST_UTIL_H_
#define AUTOACCEL_TESTS_MODEL_TEST_UTIL_H_

#include <string>

#include "spec/model_spec.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel::testing {

// A tiny model of `family` (any of KnownModelFamilies() but torchscript):
// 2 layers, width 32, 4 heads, vocabulary 96, 32 positions; the decoders use
// grouped-query attention (2 key/value heads; gemma one; deepseek_v3's
// latent attention one per head), mixtral 4 experts with top-2 routing, and
// each newer decoder the features that set it apart
// (see the cases below), with transformers' defaults elsewhere.
inline ModelSpec TinyModelSpec(const std::string& family) {
  ModelSpec m;
  m.family = family;
  m.n_layer = 2;
  m.n_embd = 32;
  m.n_head = 4;
  m.vocab_size = 96;
  m.n_positions = 32;
  if (family == "gpt2") {
    m.n_inner = 4 * m.n_embd;
    return m;
  }
  m.n_inner = 64;
  if (family == "bert") {
    m.layer_norm_epsilon = 1e-12;
    m.type_vocab_size = 2;
    m.n_kv_head = m.n_head;
  } else {
    m.layer_norm_epsilon = 1e-6;
    m.n_kv_head = 2;  // grouped-query attention
  }
  if (family == "mixtral") {
    m.num_local_experts = 4;
    m.num_experts_per_tok = 2;
  }
  if (family == "qwen3_moe") {  // layer 0 dense (mlp_only_layers), layer 1 experts
    m.head_dim = 12;
    m.num_local_experts = 4;
    m.num_experts_per_tok = 2;
    m.moe_intermediate_size = 24;
    m.dense_mlp_layers = {0};
    m.norm_topk_prob = false;
  }
  if (family == "deepseek_v3") {  // latent attention; layer 0 dense, layer 1 experts
    m.n_kv_head = m.n_head;
    m.q_lora_rank = 16;
    m.kv_lora_rank = 12;
    m.qk_nope_head_dim = 8;
    m.qk_rope_head_dim = 4;
    m.v_head_dim = 6;
    m.rope_interleave = true;
    m.num_local_experts = 8;
    m.num_experts_per_tok = 3;
    m.moe_intermediate_size = 16;
    m.dense_mlp_layers = {0};
    m.n_group = 4;
    m.topk_group = 2;
    m.routed_scaling_factor = 2.5;
    m.n_shared_experts = 2;
  }
  if (family == "gpt_oss") {  // sinks, q/k/v/o biases; layer 0 slides; 4 biased experts, top 2
    m.attention_bias = true;
    m.sliding_window = 6;
    m.layer_types = {"sliding_attention", "full_attention"};
    m.num_local_experts = 4;
    m.num_experts_per_tok = 2;
    m.swiglu_alpha = 1.702;
    m.swiglu_limit = 7.0;
  }
  if (family == "mistral") m.sliding_window = 6;  // shorter than the tests' 16 tokens
  if (family == "qwen3") m.head_dim = 12;         // (qk-norm: the family's)
  if (family == "phi3") m.partial_rotary_factor = 0.5;
  if (family == "gemma" || family == "gemma2") {
    m.head_dim = 12;  // 4 x 12 = 48-wide attention on a 32-wide model
    m.hidden_act = "gelu_pytorch_tanh";
    m.tie_word_embeddings = true;
  }
  if (family == "gemma") m.n_kv_head = 1;
  if (family == "gemma2") {
    m.sliding_window = 6;
    m.layer_types = {"sliding_attention", "full_attention"};
    m.attn_logit_softcapping = 50;
    m.final_logit_softcapping = 30;
    m.query_pre_attn_scalar = 12;
  }
  return m;
}

// A short trial of `model`: seq 16, one warm-up and two measured steps,
// global batch mbs * ga on one rank, two threads, fixed seed.
inline TrialSpec TinyTrialSpec(const ModelSpec& model, int mbs, int ga) {
  TrialSpec s;
  s.trial_id = "test";
  s.model = model;
  s.seq_len = 16;
  s.strategy.micro_batch_size = mbs;
  s.strategy.grad_accum_steps = ga;
  s.global_batch_size = mbs * ga;
  s.warmup_steps = 1;
  s.measured_steps = 2;
  s.num_threads = 2;
  s.seed = 7;
  return s;
}

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_MODEL_TEST_UTIL_H_
