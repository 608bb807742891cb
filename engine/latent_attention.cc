#include "engine/latent_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "engine/context_parallel.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

// DeepseekV3RMSNorm's default: its latent norms are built without the
// config's rms_norm_eps.
constexpr double kLatentNormEps = 1e-6;

torch::nn::Linear MakeLinear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// transformers' yarn_get_mscale.
double YarnMscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// t [..., d] rotated by cos, sin [T, d] (cat(angles, angles), as
// RotaryCosSin gives them), in t's dtype.
torch::Tensor Rotate(const torch::Tensor& t, const torch::Tensor& cos, const torch::Tensor& sin,
                     bool interleave) {
  const int64_t half = t.size(-1) / 2;
  const torch::Tensor c = cos.to(t.scalar_type()), s = sin.to(t.scalar_type());
  if (interleave) {
    // Pair i is dimensions (2i, 2i + 1), turned by angle i; the results are
    // laid out as [firsts; seconds], as transformers does.
    const torch::Tensor c_half = c.narrow(-1, 0, half), s_half = s.narrow(-1, 0, half);
    const torch::Tensor first = t.slice(-1, 0, t.size(-1), 2);
    const torch::Tensor second = t.slice(-1, 1, t.size(-1), 2);
    return torch::cat({first * c_half - second * s_half, second * c_half + first * s_half},
                      /*dim=*/-1);
  }
  const torch::Tensor rotated =
      torch::cat({-t.narrow(-1, half, half), t.narrow(-1, 0, half)}, /*dim=*/-1);
  return t * c + rotated * s;
}

}  // namespace

LatentAttentionImpl::LatentAttentionImpl(const ModelSpec& spec)
    : spec_(spec),
      heads_(spec.n_head),
      nope_(spec.qk_nope_head_dim),
      rope_(spec.qk_rope_head_dim),
      v_dim_(spec.v_head_dim),
      kv_rank_(spec.kv_lora_rank) {
  const int64_t hidden = spec.n_embd, qk = nope_ + rope_;
  const bool bias = spec.attention_bias;
  if (spec.q_lora_rank > 0) {
    q_a_proj_ = register_module("q_a_proj", MakeLinear(hidden, spec.q_lora_rank, bias));
    q_a_layernorm_ = register_module("q_a_layernorm", RmsNorm(spec.q_lora_rank, kLatentNormEps));
    q_b_proj_ = register_module("q_b_proj", MakeLinear(spec.q_lora_rank, heads_ * qk, false));
  } else {
    q_proj_ = register_module("q_proj", MakeLinear(hidden, heads_ * qk, false));
  }
  kv_a_proj_with_mqa_ =
      register_module("kv_a_proj_with_mqa", MakeLinear(hidden, kv_rank_ + rope_, bias));
  kv_a_layernorm_ = register_module("kv_a_layernorm", RmsNorm(kv_rank_, kLatentNormEps));
  kv_b_proj_ = register_module("kv_b_proj", MakeLinear(kv_rank_, heads_ * (nope_ + v_dim_), false));
  o_proj_ = register_module("o_proj", MakeLinear(heads_ * v_dim_, hidden, bias));
  shape_.causal = true;
  shape_.scale = 1.0 / std::sqrt(double(qk));
  if (spec.rope_mscale_all_dim != 0) {
    const double mscale = YarnMscale(spec.rope_factor, spec.rope_mscale_all_dim);
    shape_.scale *= mscale * mscale;
  }
}

torch::Tensor LatentAttentionImpl::Forward(const torch::Tensor& x, const RunOptions& options) {
  const torch::Tensor input = ColumnParallelInput(x, options.tp);
  const int64_t B = input.size(0), T = input.size(1);
  // Recomputed per layer, as the decoder's attention does (a checkpointed
  // layer is a function of x alone).
  const auto [cos, sin] = RotaryCosSin(ContextParallelPositions(options.cp, T, input.device()),
                                       WholeSequenceLength(options.cp, T), spec_, rope_);
  // The query bottleneck and the latent are every head's: replicated under
  // tensor parallelism, each rank's heads giving part of their gradients.
  const auto shared = [&options](const torch::nn::Linear& linear, const torch::Tensor& in) {
    return LayerLinear(in, WeightSharedAcrossRanks(linear->weight, options.tp),
                       linear->options.bias() ? WeightSharedAcrossRanks(linear->bias, options.tp)
                                              : torch::Tensor(),
                       options);
  };
  const auto shared_norm = [&options](const RmsNorm& norm, const torch::Tensor& in) {
    return norm->Apply(in, WeightSharedAcrossRanks(norm->weight(), options.tp));
  };
  const torch::Tensor q_flat =
      q_proj_
          ? LayerLinear(q_proj_, input, options)
          : LayerLinear(q_b_proj_, shared_norm(q_a_layernorm_, shared(q_a_proj_, input)), options);
  // All heads, or this rank's share under tensor parallelism.
  const int64_t heads = q_flat.size(-1) / (nope_ + rope_);
  const torch::Tensor q = q_flat.view({B, T, heads, nope_ + rope_}).transpose(1, 2);
  const std::vector<torch::Tensor> compressed =
      shared(kv_a_proj_with_mqa_, input).split_with_sizes({kv_rank_, rope_}, /*dim=*/-1);
  const torch::Tensor kv =
      LayerLinear(kv_b_proj_, shared_norm(kv_a_layernorm_, compressed[0]), options)
          .view({B, T, heads, nope_ + v_dim_})
          .transpose(1, 2);
  const std::vector<torch::Tensor> k_nope_v = kv.split_with_sizes({nope_, v_dim_}, /*dim=*/-1);
  const torch::Tensor k_rot =
      Rotate(compressed[1].view({B, 1, T, rope_}), cos, sin, spec_.rope_interleave);
  const torch::Tensor q_rot = Rotate(q.narrow(-1, nope_, rope_), cos, sin, spec_.rope_interleave);
  const torch::Tensor queries = torch::cat({q.narrow(-1, 0, nope_), q_rot}, /*dim=*/-1);
  const torch::Tensor keys =
      torch::cat({k_nope_v[0], k_rot.expand({B, heads, T, rope_})}, /*dim=*/-1);
  return RowParallelLinear(Attend(queries, keys, k_nope_v[1].contiguous(), shape_, options),
                           o_proj_->weight, spec_.attention_bias ? o_proj_->bias : torch::Tensor(),
                           options);
}

}  // namespace autoaccel
