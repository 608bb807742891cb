#include "engine/pipeline.h"

#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "engine/router_loss.h"

namespace autoaccel {

std::vector<PipelineOp> PipelineOrder(PipelineSchedule schedule, int stages, int virtual_stages,
                                      int stage, int micro_batches) {
  std::vector<PipelineOp> order;
  if (schedule == PipelineSchedule::k1F1B || virtual_stages == 1) {
    const int warmup = std::min(stages - stage - 1, micro_batches);
    for (int i = 0; i < warmup; ++i) order.push_back({true, 0, i});
    for (int i = 0; i < micro_batches - warmup; ++i) {
      order.push_back({true, 0, warmup + i});
      order.push_back({false, 0, i});
    }
    for (int i = micro_batches - warmup; i < micro_batches; ++i) order.push_back({false, 0, i});
    return order;
  }
  TORCH_CHECK(micro_batches % stages == 0, "interleaved pipeline: ", micro_batches,
              " micro-batches are not a multiple of ", stages, " stages");
  // Virtual micro-batch k: groups of `stages` micro-batches go through chunk
  // 0, then chunk 1, ... forward, and through the chunks in reverse backward.
  const int total = micro_batches * virtual_stages;
  auto op = [&](bool forward, int k) {
    const int chunk = (k / stages) % virtual_stages;
    return PipelineOp{forward, forward ? chunk : virtual_stages - 1 - chunk,
                      (k / (stages * virtual_stages)) * stages + k % stages};
  };
  const int warmup = std::min((stages - stage - 1) * 2 + (virtual_stages - 1) * stages, total);
  for (int k = 0; k < warmup; ++k) order.push_back(op(true, k));
  for (int j = 0; j < total - warmup; ++j) {
    order.push_back(op(true, warmup + j));
    order.push_back(op(false, j));
  }
  for (int j = total - warmup; j < total; ++j) order.push_back(op(false, j));
  return order;
}

LayerRange ChunkLayers(int num_layers, int chunks, int chunk) {
  const int base = num_layers / chunks, extra = num_layers % chunks;
  const int first = chunk * base + std::min(chunk, extra);
  return LayerRange{first, first + base + (chunk < extra ? 1 : 0)};
}

std::vector<int> StageLayers(int num_layers, int stages, int virtual_stages, int stage) {
  std::vector<int> layers;
  for (int c = 0; c < virtual_stages; ++c) {
    const LayerRange range = ChunkLayers(num_layers, stages * virtual_stages, c * stages + stage);
    for (int l = range.first; l < range.last; ++l) layers.push_back(l);
  }
  return layers;
}

PipelineStage::PipelineStage(TrainableModel* model, Groups* groups, DataParallel* data_parallel,
                             Options options)
    : model_(model),
      groups_(groups),
      data_parallel_(data_parallel),
      options_(std::move(options)),
      stages_(groups->pipeline().size()),
      stage_(groups->pipeline().rank()),
      chunks_(groups->pipeline().size() * options_.virtual_stages) {
  TORCH_CHECK(model_->Staged(), "the ", model_->spec().family,
              " family does not run in pipeline stages");
  const int num_layers = model_->spec().n_layer;
  TORCH_CHECK(chunks_ <= num_layers, chunks_, " pipeline chunks for ", num_layers, " layers");
  layers_ = StageLayers(num_layers, stages_, options_.virtual_stages, stage_);
  activation_dtype_ = model_->parameters().front().scalar_type();
}

bool PipelineStage::first() const { return stage_ == 0; }
bool PipelineStage::last() const { return stage_ == stages_ - 1; }

int PipelineStage::GlobalChunk(int chunk) const { return chunk * stages_ + stage_; }

int PipelineStage::Tag(bool forward, int global_chunk, int micro_batch) const {
  return ((forward ? 0 : 1) * chunks_ + global_chunk) * micro_batches_ + micro_batch;
}

int PipelineStage::RouterLossTag(bool forward, int global_chunk, int micro_batch) const {
  return 2 * chunks_ * micro_batches_ + Tag(forward, global_chunk, micro_batch);
}

void PipelineStage::Send(torch::Tensor message, int to, int tag) {
  send_buffers_.push_back(message);
  sends_.push_back(groups_->pipeline().SendAsync(message, to, tag));
}

double PipelineStage::RunStep(const std::vector<torch::Tensor>& inputs,
                              const std::vector<torch::Tensor>& targets) {
  micro_batches_ = static_cast<int>(inputs.size());
  // Under sequence parallelism a stage hands on its slice of the sequence.
  const TensorParallelShard* tp = options_.run.tp;
  const int64_t seq =
      tp != nullptr && tp->sequence_parallel ? inputs[0].size(1) / tp->size : inputs[0].size(1);
  activation_shape_ = {inputs[0].size(0), seq, model_->spec().n_embd};
  inputs_.assign(options_.virtual_stages, std::vector<torch::Tensor>(micro_batches_));
  outputs_ = inputs_;
  router_losses_.clear();
  for (int i = 0; i < micro_batches_; ++i) {
    std::unique_ptr<RouterLoss> router_loss = RouterLoss::For(model_->spec());
    if (router_loss == nullptr) break;
    router_losses_.push_back(std::move(router_loss));
  }
  const std::vector<PipelineOp> order =
      PipelineOrder(options_.schedule, stages_, options_.virtual_stages, stage_, micro_batches_);
  // Summed on the device and read once, after the step: no sync per pass.
  torch::Tensor total = torch::zeros({}, inputs[0].options().dtype(torch::kDouble));
  for (size_t n = 0; n < order.size(); ++n) {
    const PipelineOp& op = order[n];
    if (op.forward) {
      const torch::Tensor loss =
          Forward(op.chunk, op.micro_batch, inputs[op.micro_batch], targets[op.micro_batch]);
      if (loss.defined()) total += loss;
    } else {
      if (data_parallel_) data_parallel_->BeginBackward(/*last=*/n + 1 == order.size());
      Backward(op.chunk, op.micro_batch);
      if (data_parallel_) data_parallel_->EndBackward();
    }
  }
  // Sends whose receivers are done: their buffers may go.
  for (const auto& work : sends_) groups_->pipeline().Wait(work);
  sends_.clear();
  send_buffers_.clear();
  return total.item<double>();
}

torch::Tensor PipelineStage::Forward(int chunk, int micro_batch, const torch::Tensor& tokens,
                                     const torch::Tensor& target) {
  Group& pipe = groups_->pipeline();
  const int k = GlobalChunk(chunk);
  torch::Tensor input;
  if (k > 0) {
    input = torch::empty(activation_shape_, tokens.options().dtype(activation_dtype_));
    pipe.Recv(input, (stage_ + stages_ - 1) % stages_, Tag(true, k, micro_batch));
    input.requires_grad_(true);
  }
  // The micro-batch's auxiliary router loss carries on from the sums the
  // earlier stages' expert layers sent.
  RunOptions run = options_.run;
  RouterLoss* router_loss = nullptr;
  if (!router_losses_.empty()) {
    router_loss = router_losses_[micro_batch].get();
    if (k == 0) {
      router_loss->Begin();
    } else {
      torch::Tensor sums = torch::empty({2 * int64_t{model_->spec().num_local_experts} + 1},
                                        tokens.options().dtype(torch::kDouble));
      pipe.Recv(sums, (stage_ + stages_ - 1) % stages_, RouterLossTag(true, k, micro_batch));
      router_loss->Continue(sums);
    }
    run.router_loss = router_loss;
  }
  if (data_parallel_) data_parallel_->BeginForward();
  torch::Tensor h;
  torch::Tensor loss;
  {
    AutocastScope region(tokens.device().type(), options_.autocast, options_.autocast_dtype);
    h = k == 0 ? model_->Embed(tokens, run) : input;
    const LayerRange range = ChunkLayers(model_->spec().n_layer, chunks_, k);
    for (int l = range.first; l < range.last; ++l) h = model_->RunLayer(l, h, run);
    if (k == chunks_ - 1) {
      loss = model_->LossOfLogits(model_->Head(h, run), target, run);
      if (router_loss != nullptr) loss = router_loss->AddTo(loss, run);
      loss = loss / static_cast<double>(micro_batches_);
    }
  }
  inputs_[chunk][micro_batch] = input;
  if (loss.defined()) {
    outputs_[chunk][micro_batch] = loss;
    return loss.detach();
  }
  outputs_[chunk][micro_batch] = h;
  const int next = (stage_ + 1) % stages_;
  Send(h.detach().contiguous(), next, Tag(true, k + 1, micro_batch));
  if (router_loss != nullptr) {
    Send(router_loss->Close(tokens.options()), next, RouterLossTag(true, k + 1, micro_batch));
  }
  return {};
}

void PipelineStage::Backward(int chunk, int micro_batch) {
  Group& pipe = groups_->pipeline();
  const int k = GlobalChunk(chunk);
  RouterLoss* router_loss = router_losses_.empty() ? nullptr : router_losses_[micro_batch].get();
  torch::Tensor output = std::move(outputs_[chunk][micro_batch]);
  if (k == chunks_ - 1) {
    (options_.scale_loss ? options_.scale_loss(output) : output).backward();
  } else {
    // Received into a contiguous buffer: the collective needs one, and the
    // stage's output need not be (sequence-parallel activations are views).
    torch::Tensor grad = torch::empty_like(output, at::MemoryFormat::Contiguous);
    const int next = (stage_ + 1) % stages_;
    pipe.Recv(grad, next, Tag(false, k, micro_batch));
    if (router_loss != nullptr) {
      // The gradient per router probability the last stage's loss gave.
      torch::Tensor per_prob =
          torch::empty({model_->spec().num_local_experts}, grad.options().dtype(torch::kFloat));
      pipe.Recv(per_prob, next, RouterLossTag(false, k, micro_batch));
      router_loss->ReceiveGradient(per_prob);
    }
    torch::autograd::backward({output}, {grad});
  }
  torch::Tensor input = std::move(inputs_[chunk][micro_batch]);
  if (k > 0) {
    const int previous = (stage_ + stages_ - 1) % stages_;
    Send(input.grad().contiguous(), previous, Tag(false, k - 1, micro_batch));
    if (router_loss != nullptr) {
      Send(router_loss->Gradient().clone(), previous, RouterLossTag(false, k - 1, micro_batch));
    }
  }
}

}  // namespace autoaccel
