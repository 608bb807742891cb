// The trial runner's engine: builds the model for a TrialSpec, trains it for
// warm-up + measured steps on synthetic data and measures it.
//
// RunTrial() is the one place where LibTorch's exceptions are caught: OOM
// (c10::OutOfMemoryError, std::bad_alloc) becomes status OOM, anything else
// FAILED with the message. The lower-level Trainer is exposed for tests and
// throws like the LibTorch code it drives.
//
// Threading: one trial at a time per process. RunTrial installs a process-wide
// counting CPU allocator (cpu_memory.h) and sets the process's intra-op thread
// count and memory limit for the duration of the trial.
#ifndef AUTOACCEL_ENGINE_TRAINER_H_
#define AUTOACCEL_ENGINE_TRAINER_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/context_parallel.h"
#include "engine/data_parallel.h"
#include "engine/distributed.h"
#include "engine/model.h"
#include "engine/moe.h"
#include "engine/optim.h"
#include "engine/pipeline.h"
#include "engine/scripted_model.h"
#include "engine/tensor_parallel.h"
#include "trial_contract/trial_result.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {

// Checks what running `spec` needs beyond what TrialSpecFromJson checks:
// a valid model (ModelSpec::Validate), seq_len <= the model's maximum
// positions (n_positions / max_position_embeddings), steps, rank <
// world_size, num_threads >= 1, a memory limit >= 0, and the compatibility
// rules (spec/compatibility.h: positive sizes, the layout, dp * tp * pp ==
// world_size, mbs * ga * dp == global_batch_size, which families and shapes
// allow tensor, pipeline and sequence parallelism, zero1 at most with
// pipelines), except the device preferences: the runner computes in bf16 and
// offloads on any device. Returns INVALID_ARGUMENT naming the field, else OK.
absl::Status ValidateTrialSpec(const TrialSpec& spec);

// Parses "cpu", "cuda" or "cuda:N". INVALID_ARGUMENT for anything else;
// FAILED_PRECONDITION for a CUDA device this process cannot use (no GPU, or N
// out of range).
absl::StatusOr<torch::Device> ParseDevice(const std::string& device);

// Deterministic, learnable tokens: [num_sequences, length] int64 on CPU. Each
// sequence starts at a random token and follows a fixed random permutation of
// the vocabulary (token[t+1] = perm[token[t]]), all drawn from `seed`, so a
// model can drive the loss down by learning the permutation.
torch::Tensor SyntheticTokens(int vocab_size, int num_sequences, int length, uint64_t seed);

class Trainer {
 public:
  // Builds the model (BuildModel(spec.model, spec.seed)) on spec.device (in
  // bf16 for pure_bf16 and fp8; fp8 also computes the transformer layers'
  // linear layers in fp8, fp8_linear.h), the strategy's AdamW (lr 1e-3,
  // weight decay 0.01; plain or fused; fp32 master copies for pure_bf16 and
  // fp8, on the CPU with
  // offload=cpu; see optim.h), a loss scaler for fp16 and this rank's share of
  // a fixed synthetic global batch (SyntheticTokens, made into the family's
  // task by TrainableModel::MakeExample: next-token prediction, or bert's
  // masked LM), split into grad_accum_steps micro-batches.
  // A multi-rank spec first connects to the trial's other ranks
  // (Groups::Connect) and with data_parallel * context_parallel > 1 hands
  // gradient synchronisation and the sharding stage to DataParallel over the
  // data- and context-parallel ranks; under context parallelism each rank
  // keeps its share of every sequence (context_parallel.h).
  // Returns the ValidateTrialSpec / ParseDevice / Groups::Connect error;
  // INVALID_ARGUMENT for fp8 on a CUDA device under compute capability 8.9
  // ("strategy.precision: fp8 needs compute capability 8.9 or newer; cuda:0
  // is 8.0"; a build without CUDA headers cannot ask, and _scaled_mm fails
  // the first step instead).
  // Throws c10::Error (c10::OutOfMemoryError when it does not fit).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const TrialSpec& spec);

  // Clears the gradients, then runs forward + backward over every
  // micro-batch of the rank's batch, each loss scaled by 1/grad_accum_steps
  // (and by the loss scale for fp16), with the strategy's precision,
  // checkpointing and attention. Leaves the accumulated gradients in the
  // parameters (data parallel: the synchronised gradients, or this rank's
  // gradient shard). Returns the mean loss over the global batch (unscaled;
  // averaged over the data-parallel ranks). Throws c10::Error.
  double ForwardBackward();

  // One training step: ForwardBackward(), for fp16 the gradients unscaled
  // (the step skipped when one is inf or NaN), and the optimizer step.
  // Returns the step's loss (before the update). Throws c10::Error.
  double Step();

  // fp16: optimizer steps skipped for inf/NaN gradients so far, and the
  // current loss scale. 0 and 1 for other precisions.
  int skipped_steps() const { return skipped_steps_; }
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  const TrainingOptimizer& optimizer() const {
    return data_parallel_ ? data_parallel_->optimizer() : *optimizer_;
  }
  Groups& groups() { return *groups_; }
  // Every parameter's full value in model order (fsdp gathers them); for
  // checks and digests.
  std::vector<torch::Tensor> FullParameters();

  // The built-in family's network; null for a torchscript model.
  const std::shared_ptr<TrainableModel>& model() { return model_; }
  // The torchscript model; null for the built-in families.
  ScriptedModel* scripted_model() { return scripted_.get(); }

  // Tokens of one sample (seq_len; for a torchscript model seq_len when an
  // input uses T, else 1) and model FLOPs of a training step per token:
  // ModelSpec::TrainingFlopsPerToken, or 6 * parameters for a torchscript
  // model (no attention term: its architecture is not known).
  int64_t tokens_per_sample() const;
  double training_flops_per_token() const;
  const torch::Device& device() const { return device_; }
  // How the model's forward pass runs (what ForwardBackward passes it).
  const RunOptions& run_options() const { return run_options_; }
  const TrialSpec& spec() const { return spec_; }

 private:
  Trainer(const TrialSpec& spec, torch::Device device);
  // Pipeline stages: keeps (in parameters_) this stage's parameters and
  // frees the rest of the model.
  absl::Status KeepStageParameters();
  double PipelineForwardBackward();

  TrialSpec spec_;
  torch::Device device_;
  std::unique_ptr<Groups> groups_;
  std::unique_ptr<DataParallel> data_parallel_;  // data_parallel * context_parallel > 1
  std::unique_ptr<PipelineStage> pipeline_;      // pipeline_parallel > 1
  std::vector<torch::Tensor> tied_;              // pipeline: weights the first and last stage share
  TensorParallelShard tensor_parallel_;          // tensor_parallel > 1
  ContextParallelShard context_parallel_;        // context_parallel > 1
  ExpertParallelShard expert_parallel_;          // expert_parallel > 1
  RunOptions run_options_;
  std::shared_ptr<TrainableModel> model_;
  std::unique_ptr<ScriptedModel> scripted_;
  std::vector<std::vector<torch::IValue>> scripted_inputs_;  // per micro-batch
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<TrainingOptimizer> optimizer_;  // without data parallelism
  std::unique_ptr<DynamicLossScaler> scaler_;     // fp16 only
  int skipped_steps_ = 0;
  std::vector<torch::Tensor> inputs_;   // per micro-batch, [mbs, seq_len]
  std::vector<torch::Tensor> targets_;  // per micro-batch, [mbs, seq_len]
};

// What RunTrial reports after each step.
struct StepReport {
  int step = 0;  // 1-based, over warm-up and measured steps
  // warmup_steps + measured_steps, grown one at a time while the measured
  // steps have not yet covered min_measured_seconds
  int total_steps = 0;
  bool measured = false;
  double seconds = 0;
  double loss = 0;
};
using StepCallback = std::function<void(const StepReport&)>;

// Runs the whole trial: validate, build, warmup_steps untimed steps,
// measured_steps timed steps (device-synchronised steady clock), and more
// timed steps while they have covered less than min_measured_seconds (at most
// 10,000 measured steps in all). Never
// throws. SUCCEEDED with every metric filled; OOM when the memory limit or the
// device's memory is exceeded; FAILED with the reason for a bad spec, a
// non-finite loss or any other error. peak_rss_bytes is filled in every case;
// peak_memory_bytes whenever the trial got to run, OOM and FAILED included (the
// peak reached before it stopped). `on_step`, when set, is called on this
// thread after each step; what it throws is caught like the rest.
TrialResult RunTrial(const TrialSpec& spec, const StepCallback& on_step = nullptr);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_TRAINER_H_
