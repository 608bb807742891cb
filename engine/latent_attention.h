// Multi-head latent attention (DeepSeek-V2/V3), the attention of the decoder
// families whose row has latent_attention (deepseek_v3), computed as
// transformers 5.23's DeepseekV3Attention does (eager, no dropout). For x
// [B, T, hidden], with H = n_head, nope = qk_nope_head_dim, rope =
// qk_rope_head_dim:
//
//   q            = q_proj(x), or q_b_proj(q_a_layernorm(q_a_proj(x))) when
//                  q_lora_rank > 0                       [B, H, T, nope + rope]
//   latent, k_rot = kv_a_proj_with_mqa(x)                [B, T, kv_lora_rank],
//                                                        [B, 1, T, rope] (one head)
//   k_nope, v    = kv_b_proj(kv_a_layernorm(latent))     [B, H, T, nope], [B, H, T, v_head_dim]
//   the last `rope` dimensions of q and k_rot rotated (rotary size rope,
//   spec's rope_type): rope_interleave pairs dimensions (2i, 2i + 1) and
//   writes them back as [all firsts; all seconds] (transformers'
//   apply_rotary_pos_emb_interleave), else rotate_half's halves;
//   keys = [k_nope; k_rot] (k_rot shared by every head), queries = [q_nope; q_rot];
//   causal attention, scores scaled by (nope + rope)^-1/2, times
//   YarnMscale(rope_factor, rope_mscale_all_dim)^2 when rope_mscale_all_dim
//   is set; o_proj of the heads' values.
//
// q_a_layernorm and kv_a_layernorm are RMSNorms with eps 1e-6 (transformers
// builds them without rms_norm_eps). attention_bias: biases on q_a_proj,
// kv_a_proj_with_mqa and o_proj (q_proj, q_b_proj and kv_b_proj have none).
// Parameter names are transformers': "<self_attn>.q_proj.weight" or
// ".q_a_proj", ".q_a_layernorm", ".q_b_proj"; ".kv_a_proj_with_mqa",
// ".kv_a_layernorm", ".kv_b_proj", ".o_proj".
//
// Tensor parallelism (RunOptions::tp) splits the heads: q_proj or q_b_proj
// and kv_b_proj by rows (each rank's heads), o_proj by columns (partial sums
// reduced over the group); q_a_proj, kv_a_proj_with_mqa and their norms,
// which every head reads, are replicated (their gradients summed over the
// group). Methods throw c10::Error like any LibTorch code.
#ifndef AUTOACCEL_ENGINE_LATENT_ATTENTION_H_
#define AUTOACCEL_ENGINE_LATENT_ATTENTION_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>

#include "engine/llama.h"
#include "engine/model.h"
#include "spec/model_spec.h"

namespace autoaccel {

class LatentAttentionImpl : public torch::nn::Module {
 public:
  // Weights as torch::nn::Linear initialises them (the decoder
  // re-initialises every parameter). REQUIRES: spec.Validate() is OK and
  // spec.Info().latent_attention.
  explicit LatentAttentionImpl(const ModelSpec& spec);

  // x [B, T, hidden] -> [B, T, hidden]. Under context parallelism x is the
  // rank's share of the sequence (its rotary positions and Attend's ring or
  // gather follow options.cp); under sequence parallelism its slice of that.
  torch::Tensor Forward(const torch::Tensor& x, const RunOptions& options);

 private:
  ModelSpec spec_;
  int64_t heads_, nope_, rope_, v_dim_, kv_rank_;  // heads_: all of them
  AttentionShape shape_;
  torch::nn::Linear q_proj_{nullptr}, q_a_proj_{nullptr}, q_b_proj_{nullptr},
      kv_a_proj_with_mqa_{nullptr}, kv_b_proj_{nullptr}, o_proj_{nullptr};
  RmsNorm q_a_layernorm_{nullptr}, kv_a_layernorm_{nullptr};
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_LATENT_ATTENTION_H_
