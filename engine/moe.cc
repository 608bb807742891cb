#include "engine/moe.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "engine/autograd_pointers.h"
#include "engine/router_loss.h"
#include "engine/tensor_parallel.h"

namespace autoaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows of x [sum(send), ...] to the group's ranks (send[r] rows to rank r),
// receiving recv[r] rows from each; backward sends the gradients back the
// same way.
class ExchangeRows : public torch::autograd::Function<ExchangeRows> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, Group* group,
                               const std::vector<int64_t>& send, const std::vector<int64_t>& recv) {
    SavePointer(ctx, "group", group);
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    return Exchange(x, group, send, recv);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    return {Exchange(grad_outputs[0], SavedPointer<Group>(ctx, "group"),
                     ctx->saved_data["recv"].toIntVector(), ctx->saved_data["send"].toIntVector()),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

 private:
  static torch::Tensor Exchange(const torch::Tensor& x, Group* group,
                                const std::vector<int64_t>& send,
                                const std::vector<int64_t>& recv) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape[0] = std::accumulate(recv.begin(), recv.end(), int64_t{0});
    torch::Tensor in = x.contiguous();
    torch::Tensor out = torch::empty(shape, x.options());
    group->AllToAll(out, in, recv, send);
    return out;
  }
};

std::vector<int64_t> ToVector(const torch::Tensor& t) {
  const torch::Tensor cpu = t.to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel());
}

// The positions that put `order` back: out[order[i]] = i.
torch::Tensor InversePermutation(const torch::Tensor& order) {
  return torch::empty_like(order).scatter_(0, order, torch::arange(order.size(0), order.options()));
}

}  // namespace

MoeRouterImpl::MoeRouterImpl(const ModelSpec& spec)
    : kind_(spec.Info().router),
      top_k_(spec.num_experts_per_tok),
      normalize_(spec.norm_topk_prob),
      groups_(spec.n_group),
      top_groups_(spec.topk_group),
      scaling_(spec.routed_scaling_factor) {
  weight_ = register_parameter("weight", torch::empty({spec.num_local_experts, spec.n_embd}));
  if (kind_ == MoeRouter::kTopKSoftmax) {
    bias_ = register_parameter("bias", torch::zeros({spec.num_local_experts}));
  }
  if (kind_ == MoeRouter::kGroupedSigmoid) {
    score_bias_ =
        register_buffer("e_score_correction_bias", torch::zeros({spec.num_local_experts}));
  }
}

MoeRouting MoeRouterImpl::Route(const torch::Tensor& flat, const torch::Tensor& weight,
                                const torch::Tensor& bias) const {
  if (kind_ == MoeRouter::kTopKSoftmax) {
    const torch::Tensor logits = at::linear(flat, weight, bias);
    auto [top_logits, top_experts] = logits.topk(top_k_, /*dim=*/-1);  // [N, k]
    return {top_logits.softmax(/*dim=*/-1).to(torch::kFloat), top_experts, logits};
  }
  if (kind_ == MoeRouter::kSoftmax) {
    const torch::Tensor logits = at::linear(flat, weight);
    const torch::Tensor probs = logits.to(torch::kFloat).softmax(/*dim=*/-1);
    auto [top_weights, top_experts] = probs.topk(top_k_, /*dim=*/-1);  // [N, k]
    if (normalize_) top_weights = top_weights / top_weights.sum(/*dim=*/-1, /*keepdim=*/true);
    return {top_weights, top_experts, logits};
  }
  const int64_t n = flat.size(0), experts = weight.size(0);
  const torch::Tensor scores =
      at::linear(flat.to(torch::kFloat), weight.to(torch::kFloat)).sigmoid();  // [N, E]
  // Choosing is not differentiated (as in transformers, whose indices
  // carry no gradient): only the chosen scores, gathered below, do.
  torch::Tensor ranked = scores.detach() + score_bias_.to(torch::kFloat);
  const torch::Tensor group_scores =
      std::get<0>(ranked.view({n, groups_, experts / groups_}).topk(2, /*dim=*/-1))
          .sum(/*dim=*/-1);  // [N, groups]
  const torch::Tensor top_groups = std::get<1>(group_scores.topk(top_groups_, /*dim=*/-1));
  const torch::Tensor in_top_group = torch::zeros_like(group_scores, torch::kBool)
                                         .scatter_(1, top_groups, true)
                                         .unsqueeze(-1)
                                         .expand({n, groups_, experts / groups_})
                                         .reshape({n, experts});
  ranked = ranked.masked_fill(in_top_group.logical_not(), -std::numeric_limits<double>::infinity());
  const torch::Tensor top_experts = std::get<1>(ranked.topk(top_k_, /*dim=*/-1));
  torch::Tensor top_weights = scores.gather(1, top_experts);
  if (normalize_)
    top_weights = top_weights / (top_weights.sum(/*dim=*/-1, /*keepdim=*/true) + 1e-20);
  return {top_weights * scaling_, top_experts, torch::Tensor()};
}

SparseMoeImpl::SparseMoeImpl(const ModelSpec& spec) : num_experts_(spec.num_local_experts) {
  const int64_t width = spec.ExpertWidth(), hidden = spec.n_embd;
  const bool gpt_oss = spec.Info().clamped_swiglu;
  gate_ = register_module(spec.Info().router == MoeRouter::kTopKSoftmax ? "router" : "gate",
                          std::make_shared<MoeRouterImpl>(spec));
  auto experts = register_module("experts", std::make_shared<torch::nn::Module>());
  if (gpt_oss) {
    gate_up_proj_ = experts->register_parameter("gate_up_proj",
                                                torch::empty({num_experts_, hidden, 2 * width}));
    gate_up_proj_bias_ =
        experts->register_parameter("gate_up_proj_bias", torch::zeros({num_experts_, 2 * width}));
    down_proj_ =
        experts->register_parameter("down_proj", torch::empty({num_experts_, width, hidden}));
    down_proj_bias_ =
        experts->register_parameter("down_proj_bias", torch::zeros({num_experts_, hidden}));
    swiglu_alpha_ = spec.swiglu_alpha;
    swiglu_limit_ = spec.swiglu_limit;
  } else {
    gate_up_proj_ = experts->register_parameter("gate_up_proj",
                                                torch::empty({num_experts_, 2 * width, hidden}));
    down_proj_ =
        experts->register_parameter("down_proj", torch::empty({num_experts_, hidden, width}));
  }
  if (spec.Info().shared_experts) {
    const int64_t shared = width * spec.n_shared_experts;
    auto module = register_module("shared_experts", std::make_shared<torch::nn::Module>());
    auto linear = [&](const char* name, int64_t in, int64_t out) {
      return module->register_module(
          name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)));
    };
    shared_gate_proj_ = linear("gate_proj", spec.n_embd, shared);
    shared_up_proj_ = linear("up_proj", spec.n_embd, shared);
    shared_down_proj_ = linear("down_proj", shared, spec.n_embd);
  }
}

torch::Tensor SparseMoeImpl::ClampedSwiGluExpert(int64_t e, const torch::Tensor& rows,
                                                 const torch::Tensor& down_bias,
                                                 const RunOptions& options) {
  // rows @ gate_up_proj[e] + bias, as transformers' GptOssExperts. As a
  // linear layer's [out, in] weight: a transposed view, made contiguous
  // for fp8 (its product takes row-major weights).
  auto as_linear = [&](const torch::Tensor& w) { return options.fp8 ? w.t().contiguous() : w.t(); };
  const torch::Tensor gate_up =
      LayerLinear(rows, as_linear(gate_up_proj_[e]), gate_up_proj_bias_[e], options);
  const torch::Tensor gate = gate_up.slice(/*dim=*/-1, 0, c10::nullopt, 2).clamp_max(swiglu_limit_);
  const torch::Tensor up =
      gate_up.slice(/*dim=*/-1, 1, c10::nullopt, 2).clamp(-swiglu_limit_, swiglu_limit_);
  const torch::Tensor glu = gate * torch::sigmoid(gate * swiglu_alpha_);
  return LayerLinear((up + 1) * glu, as_linear(down_proj_[e]), down_bias[e], options);
}

torch::Tensor SparseMoeImpl::RunExperts(const torch::Tensor& rows,
                                        const std::vector<int64_t>& counts,
                                        const RunOptions& options) {
  std::vector<torch::Tensor> outputs;
  // gpt_oss: down_proj_bias once over the tensor-parallel group's partial
  // sums (the first rank's), its gradient summed over the group.
  torch::Tensor down_bias;
  if (down_proj_bias_.defined()) {
    down_bias = WeightSharedAcrossRanks(down_proj_bias_, options.tp);
    if (options.tp != nullptr && options.tp->rank != 0) down_bias = down_bias * 0;
  }
  int64_t start = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    const torch::Tensor mine = rows.narrow(0, start, counts[e]);
    start += counts[e];
    if (down_bias.defined()) {
      outputs.push_back(ClampedSwiGluExpert(static_cast<int64_t>(e), mine, down_bias, options));
      continue;
    }
    const std::vector<torch::Tensor> gate_up =
        LayerLinear(mine, gate_up_proj_[e], torch::Tensor(), options).chunk(2, /*dim=*/-1);
    outputs.push_back(
        LayerLinear(at::silu(gate_up[0]) * gate_up[1], down_proj_[e], torch::Tensor(), options));
  }
  return torch::cat(outputs, /*dim=*/0);
}

torch::Tensor SparseMoeImpl::Forward(const torch::Tensor& x, const RunOptions& options) {
  // Every token of the tensor-parallel group (the whole sequence under
  // sequence parallelism), the router replicated.
  const torch::Tensor input = ColumnParallelInput(x, options.tp);
  const torch::Tensor flat = input.reshape({-1, input.size(-1)});
  const MoeRouting routing =
      gate_->Route(flat, WeightSharedAcrossRanks(gate_->weight(), options.tp),
                   gate_->bias().defined() ? WeightSharedAcrossRanks(gate_->bias(), options.tp)
                                           : torch::Tensor());
  const int64_t k = routing.experts.size(1);

  // The (token, slot) assignments sorted by expert (stable: each expert's
  // tokens in order), and how many each expert got.
  const torch::Tensor expert_of = routing.experts.reshape(-1);
  const torch::Tensor order =
      std::get<1>(expert_of.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  const torch::Tensor per_expert = at::bincount(expert_of, {}, num_experts_);
  torch::Tensor rows = flat.index_select(0, order.div(k, "floor"));

  const ExpertParallelShard* ep = options.ep;
  torch::Tensor outputs;
  if (ep == nullptr || ep->size == 1) {
    outputs = RunExperts(rows, ToVector(per_expert), options);
  } else {
    // Each rank's assignments go to the rank of their expert; the counts per
    // (source rank, local expert) come first, so every rank knows what it
    // receives.
    const int64_t local = num_experts_ / ep->size;
    torch::Tensor counts_out = per_expert.contiguous();
    torch::Tensor counts_in = torch::empty_like(counts_out);
    const std::vector<int64_t> equal(ep->size, local);
    ep->group->AllToAll(counts_in, counts_out, equal, equal);
    // Both counts on the host at once (one device sync): sent [expert],
    // received [source][local expert].
    const std::vector<int64_t> counts = ToVector(torch::cat({counts_out, counts_in}));
    const int64_t* sent = counts.data();
    const int64_t* received = counts.data() + num_experts_;
    std::vector<int64_t> send(ep->size), recv(ep->size), per_local(local, 0);
    for (int r = 0; r < ep->size; ++r) {
      for (int64_t e = 0; e < local; ++e) {
        send[r] += sent[r * local + e];
        recv[r] += received[r * local + e];
        per_local[e] += received[r * local + e];
      }
    }
    rows = ExchangeRows::apply(rows, ep->group, send, recv);
    // Arrived ordered by (source, expert): regroup by expert, run, put back.
    const torch::Tensor local_expert = torch::arange(local, per_expert.options())
                                           .repeat({ep->size})
                                           .repeat_interleave(counts_in, /*dim=*/0);
    const torch::Tensor by_expert =
        std::get<1>(local_expert.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
    outputs = RunExperts(rows.index_select(0, by_expert), per_local, options)
                  .index_select(0, InversePermutation(by_expert));
    outputs = ExchangeRows::apply(outputs, ep->group, recv, send);
  }
  // Back in (token, slot) order, weighted, summed over each token's experts.
  const torch::Tensor combined =
      (outputs.index_select(0, InversePermutation(order)).view({flat.size(0), k, -1}) *
       routing.weights.unsqueeze(-1))
          .sum(/*dim=*/1);
  torch::Tensor partial = combined.to(flat.scalar_type()).view(input.sizes());
  // deepseek_v3's shared experts see every token, split like a dense MLP
  // under tensor parallelism (their partial sums reduced with the routed
  // experts').
  if (shared_down_proj_) {
    partial = partial + LayerLinear(shared_down_proj_,
                                    at::silu(LayerLinear(shared_gate_proj_, input, options)) *
                                        LayerLinear(shared_up_proj_, input, options),
                                    options);
  }
  torch::Tensor out = SumPartials(partial, options.tp);
  if (options.router_loss != nullptr) out = options.router_loss->Record(routing.logits, out);
  return out;
}

}  // namespace autoaccel
