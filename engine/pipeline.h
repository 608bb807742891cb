// Pipeline parallelism: the model's layers split into stages over the
// pipeline group, micro-batches flowing through them.
//
// The L layers form pp * virtual_stages chunks of consecutive layers (as
// even as possible; chunk k on stage k % pp). The first chunk also embeds
// the tokens, the last one applies the head and the loss. Each stage runs
// its schedule of forward and backward passes (PipelineOps): activations go
// to the next stage and gradients back with point-to-point sends (started
// without waiting, so that no two stages can block on each other) and
// blocking receives; a model trained with an auxiliary router loss sends
// that loss's sums with the activations and its gradient per router
// probability with theirs (router_loss.h).
//
//   1f1b         stage s runs min(pp - s - 1, m) forwards, then alternates
//                one forward and one backward, then the remaining backwards:
//                at most pp - s micro-batches in flight.
//   interleaved  Megatron's interleaved 1F1B over the stage's
//                virtual_stages chunks (m must be a multiple of pp): a
//                smaller bubble for more messages.
#ifndef AUTOACCEL_ENGINE_PIPELINE_H_
#define AUTOACCEL_ENGINE_PIPELINE_H_

#include <torch/types.h>

#include <functional>
#include <memory>
#include <vector>

#include "engine/data_parallel.h"
#include "engine/distributed.h"
#include "engine/model.h"
#include "engine/router_loss.h"
#include "engine/tensor_parallel.h"
#include "spec/strategy.h"

namespace autoaccel {

struct PipelineOp {
  bool forward = true;
  int chunk = 0;        // the stage's local chunk, 0..virtual_stages - 1
  int micro_batch = 0;  // 0..m - 1
  friend bool operator==(const PipelineOp& a, const PipelineOp& b) {
    return a.forward == b.forward && a.chunk == b.chunk && a.micro_batch == b.micro_batch;
  }
};

// The order stage `stage` of `stages` runs its passes over `micro_batches`
// micro-batches. Every (chunk, micro-batch) appears once forward and once
// backward, its forward first. REQUIRES: for kInterleaved, micro_batches a
// multiple of stages.
std::vector<PipelineOp> PipelineOrder(PipelineSchedule schedule, int stages, int virtual_stages,
                                      int stage, int micro_batches);

// Layers [first, last) of chunk `chunk` of `chunks` over `num_layers`
// layers: consecutive, the first num_layers % chunks chunks one longer.
struct LayerRange {
  int first = 0;
  int last = 0;
};
LayerRange ChunkLayers(int num_layers, int chunks, int chunk);

// The layers stage `stage` of `stages` runs, ascending: those of its chunks
// stage, stage + stages, ... (virtual_stages of them).
std::vector<int> StageLayers(int num_layers, int stages, int virtual_stages, int stage);

// One stage's share of a training step.
class PipelineStage {
 public:
  struct Options {
    PipelineSchedule schedule = PipelineSchedule::k1F1B;
    int virtual_stages = 1;
    RunOptions run;
    // Autocast for the forward passes (bf16 and fp16 precisions).
    bool autocast = false;
    c10::ScalarType autocast_dtype = torch::kBFloat16;
    // Multiplies each micro-batch's loss before backward (fp16 loss scale).
    std::function<torch::Tensor(const torch::Tensor&)> scale_loss;
  };

  // `model` is the full model (every stage builds it; the stage uses only
  // its chunks' layers and, on the first and last stage, the embedding and
  // head). `data_parallel` may be null. Everything must outlive the stage.
  PipelineStage(TrainableModel* model, Groups* groups, DataParallel* data_parallel,
                Options options);

  // The layers this stage runs, ascending, and whether it holds the first
  // and the last chunk.
  const std::vector<int>& layers() const { return layers_; }
  bool first() const;
  bool last() const;

  // Forward and backward over every micro-batch (`inputs`, `targets`: the
  // rank's micro-batches), each loss scaled by 1 / micro-batches, the
  // gradients left in the parameters. Returns the sum of the scaled losses
  // on the last stage, 0 elsewhere. Throws c10::Error.
  double RunStep(const std::vector<torch::Tensor>& inputs,
                 const std::vector<torch::Tensor>& targets);

 private:
  torch::Tensor Forward(int chunk, int micro_batch, const torch::Tensor& tokens,
                        const torch::Tensor& target);
  void Backward(int chunk, int micro_batch);
  int GlobalChunk(int chunk) const;
  int Tag(bool forward, int global_chunk, int micro_batch) const;
  // The auxiliary router loss's messages: after every Tag.
  int RouterLossTag(bool forward, int global_chunk, int micro_batch) const;
  // Starts sending `message` to stage `to`; it is kept until the step ends.
  void Send(torch::Tensor message, int to, int tag);

  TrainableModel* model_;
  Groups* groups_;
  DataParallel* data_parallel_;
  Options options_;
  int stages_, stage_, chunks_, micro_batches_ = 0;
  std::vector<int> layers_;
  std::vector<int64_t> activation_shape_;
  c10::ScalarType activation_dtype_ = torch::kFloat;
  // Per (chunk, micro-batch) in flight: the received input (a leaf) and the
  // output (or the scaled loss on the last chunk).
  std::vector<std::vector<torch::Tensor>> inputs_, outputs_;
  std::vector<c10::intrusive_ptr<c10d::Work>> sends_;
  std::vector<torch::Tensor> send_buffers_;
  // A model trained with an auxiliary router loss (router_loss.h): one per
  // micro-batch, its sums handed on with the activations and its gradient
  // per probability handed back with theirs. Empty otherwise.
  std::vector<std::unique_ptr<RouterLoss>> router_losses_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_PIPELINE_H_
