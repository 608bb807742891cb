#include "search/proxy.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace autoaccel {
namespace {

absl::Status ProxyError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("proxy: ", message));
}

// The first layer with experts, or -1 (a dense model, or none).
int FirstExpertLayer(const ModelSpec& model) {
  for (int i = 0; i < model.n_layer; ++i) {
    if (model.ExpertLayer(i)) return i;
  }
  return -1;
}

}  // namespace

absl::StatusOr<ProxyRequest> ParseProxyRequest(absl::string_view text) {
  ProxyRequest r;
  if (text == "auto") {
    r.automatic = true;
    return r;
  }
  bool seen_layers = false, seen_world = false;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, '=');
    bool* seen = nullptr;
    int* value = nullptr;
    if (kv.first == "layers") {
      seen = &seen_layers;
      value = &r.layers;
    } else if (kv.first == "world-size") {
      seen = &seen_world;
      value = &r.world_size;
    } else {
      return ProxyError(absl::StrCat("expected auto or layers=N[,world-size=M], got '", text,
                                     "' (unknown key '", kv.first, "')"));
    }
    if (*seen) return ProxyError(absl::StrCat("'", kv.first, "' given twice in '", text, "'"));
    *seen = true;
    if (!absl::SimpleAtoi(kv.second, value) || *value < 1) {
      return ProxyError(
          absl::StrCat(kv.first, " must be a positive integer, got '", kv.second, "'"));
    }
  }
  if (!seen_layers) {
    return ProxyError(absl::StrCat("expected auto or layers=N[,world-size=M], got '", text, "'"));
  }
  return r;
}

std::string ProxyRequestText(const ProxyRequest& request) {
  if (request.automatic) return "auto";
  std::string out = absl::StrCat("layers=", request.layers);
  if (request.world_size > 0) absl::StrAppend(&out, ",world-size=", request.world_size);
  return out;
}

absl::StatusOr<ModelSpec> ProxyModel(const ModelSpec& model, int layers) {
  if (model.IsTorchScript()) {
    return ProxyError("a torchscript model's layers are unknown: it cannot be cut to a proxy");
  }
  if (layers < 1 || layers > model.n_layer) {
    return ProxyError(
        absl::StrCat("layers must be 1 to the model's ", model.n_layer, ", got ", layers));
  }
  ModelSpec proxy = model;
  proxy.n_layer = layers;
  if (!proxy.layer_types.empty()) proxy.layer_types.resize(layers);
  proxy.dense_mlp_layers.erase(
      std::remove_if(proxy.dense_mlp_layers.begin(), proxy.dense_mlp_layers.end(),
                     [layers](int l) { return l >= layers; }),
      proxy.dense_mlp_layers.end());
  const int first_expert = FirstExpertLayer(model);
  if (first_expert >= layers) {
    return ProxyError(absl::StrCat(
        "the model's first ", first_expert, " layers are dense, so a proxy of ", layers,
        " would measure no expert: use layers=", first_expert + 1, " or more"));
  }
  return proxy;
}

absl::StatusOr<ProxyMapping> ProxyMapping::Create(const TrainingSetup& full, ProxyShape shape) {
  if (shape.world_size < 1 || shape.world_size > full.world_size ||
      full.world_size % shape.world_size != 0) {
    return ProxyError(absl::StrCat("world-size must divide the job's world size (", full.world_size,
                                   "), got ", shape.world_size));
  }
  absl::StatusOr<ModelSpec> proxy = ProxyModel(full.model, shape.layers);
  if (!proxy.ok()) return proxy.status();
  if (shape.layers == full.model.n_layer && shape.world_size == full.world_size) {
    return ProxyError(absl::StrCat("layers=", shape.layers, ",world-size=", shape.world_size,
                                   " is the full run itself: leave --proxy out"));
  }
  return ProxyMapping(full, *std::move(proxy), shape);
}

absl::StatusOr<ProxyTrial> ProxyMapping::TrialOf(const Strategy& full) const {
  const int group = full.tensor_parallel * full.context_parallel;
  if (shape_.world_size % group != 0) {
    return ProxyError(absl::StrCat("tensor x context parallel ", full.tensor_parallel, "x",
                                   full.context_parallel, " does not divide the proxy's ",
                                   shape_.world_size, " ranks"));
  }
  ProxyTrial t;
  t.setup = full_;
  t.setup.model = proxy_model_;
  t.setup.world_size = shape_.world_size;
  // Stage counts to try: the one that keeps the full strategy's layers per
  // stage, then no pipeline.
  std::vector<int> stages;
  const int per_stage = full_.model.n_layer / full.pipeline_parallel;
  if (full.pipeline_parallel > 1 && shape_.layers % per_stage == 0) {
    const int p = shape_.layers / per_stage;
    if (p >= 2 && shape_.world_size % (group * p) == 0) stages.push_back(p);
  }
  stages.push_back(1);
  absl::Status refused;
  for (int p : stages) {
    Strategy s = full;
    s.pipeline_parallel = p;
    if (p == 1) {
      s.pipeline_schedule = PipelineSchedule::k1F1B;
      s.virtual_stages = 1;
    }
    s.data_parallel = shape_.world_size / (group * p);
    if (s.weight_replicas() == 1) s.sharding = Sharding::kNone;
    if (s.weight_replicas() % s.expert_parallel != 0) {
      return ProxyError(absl::StrCat("expert parallel ", full.expert_parallel,
                                     " does not divide the proxy's ", s.weight_replicas(),
                                     " data x context parallel ranks"));
    }
    t.setup.global_batch_size = s.micro_batch_size * s.grad_accum_steps * s.data_parallel;
    refused = CheckCompatible(t.setup, s);
    if (refused.ok()) {
      t.strategy = s;
      return t;
    }
  }
  return ProxyError(absl::StrCat("the proxy (", Describe(), ") cannot run ", StrategyToText(full),
                                 ": ", refused.message()));
}

std::string ProxyMapping::Describe() const {
  return absl::StrCat(shape_.layers, " of ", full_.model.n_layer, " layers on ", shape_.world_size,
                      " of ", full_.world_size, " ranks");
}

absl::StatusOr<ProxyShape> ChooseProxy(const TrainingSetup& full,
                                       const std::vector<Strategy>& candidates, int pool_devices) {
  if (candidates.empty()) return absl::InvalidArgumentError("proxy: auto: no candidates");
  int group = 1, deepest = 1;
  for (const Strategy& s : candidates) {
    group = std::lcm(group, s.tensor_parallel * s.context_parallel);
    deepest = std::max(deepest, s.pipeline_parallel);
  }
  ProxyShape shape;
  const int least = std::max(group, std::min(2, full.world_size));
  for (int m = least; m <= std::min(full.world_size, pool_devices); ++m) {
    if (full.world_size % m == 0 && m % group == 0) {
      shape.world_size = m;
      break;
    }
  }
  if (shape.world_size == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "proxy: auto: the pool's ", pool_devices, " devices cannot hold a proxy of ", least,
        " ranks (a multiple of every candidate's tensor x context parallel group: ", group, ")"));
  }
  const int L = full.model.n_layer;
  const int stage = deepest > 1 ? L / deepest : 1;  // the layers of one stage
  const int need = std::max(2, FirstExpertLayer(full.model) + 1);
  shape.layers = std::min(L, (need + stage - 1) / stage * stage);
  return shape;
}

}  // namespace autoaccel
