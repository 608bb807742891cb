// Proxy trials (`tune --proxy`): when a model is too big, or its pool too
// small, to dry-run every candidate at full size, each candidate is measured
// on a stand-in with fewer layers and fewer ranks, and the full run's step
// time and memory are extrapolated from that measurement
// (search/proxy_extrapolation.h).
//
// A proxy keeps what sets the time of one layer on one rank: the tensor-,
// context- and expert-parallel sizes, sequence parallelism, the micro-batch
// and the accumulation, precision, recompute, attention, optimizer and
// offload. It changes what extrapolation can correct: the number of layers
// (the model's first `layers` layers), the pipeline stages (the full
// strategy's layers per stage kept where the proxy's layers and ranks
// allow, else one stage) and the data-parallel replicas (what the proxy's
// ranks leave over). NVIDIA tunes its largest recipes on such layer-reduced
// proxies, keeping layers per stage and micro-batches.
//
// Pure; safe from any thread.
#ifndef AUTOACCEL_SEARCH_PROXY_H_
#define AUTOACCEL_SEARCH_PROXY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spec/compatibility.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

// What the user asked for: "auto", or "layers=N" with an optional
// ",world-size=M" (M 0: the job's world size).
struct ProxyRequest {
  bool automatic = false;
  int layers = 0;
  int world_size = 0;
};

// Parses --proxy's value (TuneRequest.proxy). INVALID_ARGUMENT starting
// "proxy: " (the request's field, the CLI's --proxy) for anything
// else: an unknown key, a missing or non-positive number, a repeated key,
// "auto" with sizes.
absl::StatusOr<ProxyRequest> ParseProxyRequest(absl::string_view text);
// "auto", "layers=2", "layers=2,world-size=4": parses back to the same.
std::string ProxyRequestText(const ProxyRequest& request);

// A proxy's size.
struct ProxyShape {
  int layers = 0;      // of the model's n_layer
  int world_size = 0;  // ranks of every proxy trial
};

// The model's first `layers` layers: n_layer, layer_types and the dense
// layers of a mixture of experts cut to them. INVALID_ARGUMENT starting "proxy: "
// when layers is not in 1..n_layer, or when a mixture of experts
// would keep none of its expert layers ("its first 3 layers are dense: use
// layers=4 or more"); a torchscript model has no layers to cut.
absl::StatusOr<ModelSpec> ProxyModel(const ModelSpec& model, int layers);

// One candidate's proxy trial: what runs in its place.
struct ProxyTrial {
  TrainingSetup setup;  // the proxy model, its global batch and world size
  Strategy strategy;
};

// How the candidates of one job map to their proxy trials.
class ProxyMapping {
 public:
  // `full` is the job's setup (model, seq_len, global batch, world size,
  // device facts). INVALID_ARGUMENT as ProxyModel's, and ("proxy: ...")
  // when the proxy's world size is not in 1..full.world_size or does not
  // divide it, or when the proxy would be the full run (same layers and
  // ranks).
  static absl::StatusOr<ProxyMapping> Create(const TrainingSetup& full, ProxyShape shape);

  // The proxy trial of a full-size candidate: its tensor-, context- and
  // expert-parallel sizes and everything but the layout kept; pipeline
  // stages p' the largest that keeps the full strategy's layers per stage
  // (each of p' stages holding L / p of the proxy's layers, with the
  // interleaved schedule's virtual stages when they still divide) and whose
  // tp·cp·p' divides the proxy's ranks, else 1; data parallel the ranks
  // left over; the global batch micro-batch × accumulation × that data
  // parallel; sharding none when one replica is left. INVALID_ARGUMENT
  // when the proxy's ranks cannot hold its model-parallel group (tp·cp
  // does not divide them) or its expert parallelism, or when the proxy
  // setup refuses the proxy strategy (CheckCompatible's message).
  absl::StatusOr<ProxyTrial> TrialOf(const Strategy& full) const;

  const TrainingSetup& full() const { return full_; }
  const ModelSpec& proxy_model() const { return proxy_model_; }
  const ProxyShape& shape() const { return shape_; }
  // "2 of 8 layers on 2 of 4 ranks".
  std::string Describe() const;

 private:
  ProxyMapping(TrainingSetup full, ModelSpec proxy_model, ProxyShape shape)
      : full_(std::move(full)), proxy_model_(std::move(proxy_model)), shape_(shape) {}

  TrainingSetup full_;
  ModelSpec proxy_model_;
  ProxyShape shape_;
};

// `--proxy auto`'s choice for a job whose candidates are `candidates`, on a
// pool of `pool_devices`:
//   world size  the smallest divisor of the job's world size that is a
//               multiple of every candidate's tensor x context group and
//               at least 2 ranks (so that data-parallel communication is
//               measured, not only modelled) where the world has them, and
//               fits the pool: pool / M proxies run side by side;
//   layers      the smallest multiple of one stage of the deepest pipeline
//               among the candidates (L / max p layers; 1 layer when none
//               is pipelined) that is at least 2 and, for a mixture of
//               experts, holds an expert layer; at most L.
// The time limit does not enter: both choices are the smallest that keep
// what a proxy must measure, so that the most trials fit in any limit.
// The choice may be the full run itself (a model of 2 layers on 2 ranks):
// the caller then measures at full size. FAILED_PRECONDITION when the pool
// cannot hold such a proxy; INVALID_ARGUMENT for no candidates.
absl::StatusOr<ProxyShape> ChooseProxy(const TrainingSetup& full,
                                       const std::vector<Strategy>& candidates, int pool_devices);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_PROXY_H_
