#include "engine/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/build_model.h"
#include "engine/cpu_memory.h"
#include "engine/cuda_capability.h"
#include "engine/fp8_linear.h"
#include "spec/compatibility.h"
#include "spec/step_statistics.h"

namespace autoaccel {
namespace {

bool IsCuda(const torch::Device& device) { return device.type() == c10::DeviceType::CUDA; }

void Synchronize(const torch::Device& device) {
  if (IsCuda(device)) torch::cuda::synchronize(device.index());
}

// The caching allocator's statistics through the device-generic interface, so
// that no CUDA header is needed to build this file.
c10::CachingAllocator::Stat DeviceAllocatedBytes(const torch::Device& device) {
  return c10::getDeviceAllocator(device.type())
      ->getDeviceStats(device.index())
      .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}

// How long a rank waits for its peers, at the rendezvous and in any
// collective, before it gives up; the worker's trial timeout usually ends a
// stuck trial first.
constexpr std::chrono::milliseconds kCollectiveTimeout = std::chrono::minutes(10);

}  // namespace

absl::Status ValidateTrialSpec(const TrialSpec& spec) {
  const ModelSpec& m = spec.model;
  RETURN_IF_ERROR(m.Validate());
  if (spec.seq_len <= 0) return absl::InvalidArgumentError("seq_len: must be positive");
  if (spec.seq_len > m.MaxSeqLen()) {
    return absl::InvalidArgumentError(absl::StrCat("seq_len: ", spec.seq_len,
                                                   " exceeds the model's ", m.MaxPositionsKey(),
                                                   " (", m.n_positions, ")"));
  }
  if (spec.warmup_steps < 0) return absl::InvalidArgumentError("warmup_steps: must be >= 0");
  if (spec.measured_steps <= 0) {
    return absl::InvalidArgumentError("measured_steps: must be positive");
  }
  if (spec.world_size <= 0 || spec.rank < 0 || spec.rank >= spec.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank/world_size: rank ", spec.rank, " of world_size ", spec.world_size));
  }
  // Whether the strategy can run on this model at all is the compatibility
  // rules (sizes, layout, batch and world products, families and shapes for
  // tensor, pipeline and sequence parallelism), with the runner's
  // capabilities: it computes in bf16 and offloads on any device.
  TrainingSetup setup;
  setup.model = m;
  setup.seq_len = spec.seq_len;
  setup.global_batch_size = spec.global_batch_size;
  setup.world_size = spec.world_size;
  setup.device_supports_bf16 = true;
  setup.device_is_accelerator = true;
  RETURN_IF_ERROR(CheckCompatible(setup, spec.strategy));
  if (spec.num_threads < 1) return absl::InvalidArgumentError("num_threads: must be >= 1");
  if (spec.memory_limit_bytes < 0) {
    return absl::InvalidArgumentError("memory_limit_bytes: must be >= 0 (0 means no limit)");
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::Device> ParseDevice(const std::string& device) {
  if (device == "cpu") return torch::Device(torch::kCPU);
  int index = 0;
  if (device != "cuda") {
    if (!absl::StartsWith(device, "cuda:") || !absl::SimpleAtoi(device.substr(5), &index) ||
        index < 0 || index > 127) {
      return absl::InvalidArgumentError(
          absl::StrCat("device: '", device, "' (allowed: cpu, cuda, cuda:N)"));
    }
  }
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device: ", device, " requested but CUDA is not available here"));
  }
  const int count = static_cast<int>(torch::cuda::device_count());
  if (index >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device: ", device, " requested but this machine has ", count, " CUDA device(s)"));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

torch::Tensor SyntheticTokens(int vocab_size, int num_sequences, int length, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const torch::Tensor perm = torch::randperm(vocab_size, gen, torch::kLong);
  torch::Tensor tokens = torch::empty({num_sequences, length}, torch::kLong);
  tokens.select(1, 0).copy_(torch::randint(vocab_size, {num_sequences}, gen, torch::kLong));
  for (int t = 1; t < length; ++t) {
    tokens.select(1, t).copy_(perm.index_select(0, tokens.select(1, t - 1)));
  }
  return tokens;
}

Trainer::Trainer(const TrialSpec& spec, torch::Device device) : spec_(spec), device_(device) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrialSpec& spec) {
  RETURN_IF_ERROR(ValidateTrialSpec(spec));
  ASSIGN_OR_RETURN(torch::Device device, ParseDevice(spec.device));
  const Strategy& strategy = spec.strategy;
  if (strategy.precision == Precision::kFp8 && IsCuda(device)) {
    if (const auto capability = CudaComputeCapability(device.index())) {
      RETURN_IF_ERROR(CheckFp8ComputeCapability(absl::StrCat("cuda:", int{device.index()}),
                                                capability->first, capability->second));
    }
  }
  std::unique_ptr<Trainer> t(new Trainer(spec, device));
  if (spec.world_size > 1) {
    ASSIGN_OR_RETURN(t->groups_, Groups::Connect(spec, device, kCollectiveTimeout));
  } else {
    t->groups_ = Groups::Single();
  }
  t->run_options_.attention = spec.strategy.attention;
  t->run_options_.checkpointing = spec.strategy.checkpointing;
  t->run_options_.checkpoint_percent = spec.strategy.checkpoint_percent;
  // fp8 is pure_bf16 (bf16 weights, fp32 master copies) with the layers'
  // linear layers in fp8.
  t->run_options_.fp8 = strategy.precision == Precision::kFp8;

  const bool pure_bf16 = KeepsBf16Weights(strategy.precision);
  if (spec.model.IsTorchScript()) {
    if (spec.model_file.empty()) {
      return absl::InvalidArgumentError("model_file: the trial spec names no torchscript file");
    }
    ASSIGN_OR_RETURN(const InputSpec inputs, ParseInputSpec(spec.model.input_spec));
    ASSIGN_OR_RETURN(t->scripted_, ScriptedModel::Load(spec.model_file, inputs));
    t->scripted_->To(device,
                     pure_bf16 ? std::optional<c10::ScalarType>(torch::kBFloat16) : std::nullopt);
    t->scripted_->Train();
    t->parameters_ = t->scripted_->Parameters();
  } else {
    ASSIGN_OR_RETURN(t->model_, BuildModel(spec.model, spec.seed));
    std::unordered_map<const void*, int64_t> full_numel;
    for (const torch::Tensor& p : t->model_->parameters()) {
      full_numel[p.unsafeGetTensorImpl()] = p.numel();
    }
    if (strategy.tensor_parallel > 1) {
      // Every rank builds the same full model, then keeps its slices.
      TensorParallelShard& tp = t->tensor_parallel_;
      tp.group = &t->groups_->tensor();
      tp.rank = tp.group->rank();
      tp.size = tp.group->size();
      tp.vocab_size = spec.model.vocab_size;
      tp.vocab_per_rank = (tp.vocab_size + tp.size - 1) / tp.size;
      tp.sequence_parallel = strategy.sequence_parallel;
      RETURN_IF_ERROR(t->model_->ShardTensorParallel(tp));
      t->run_options_.tp = &tp;
    }
    if (strategy.context_parallel > 1) {
      ContextParallelShard& cp = t->context_parallel_;
      cp.group = &t->groups_->context();
      cp.rank = cp.group->rank();
      cp.size = cp.group->size();
      cp.seq_len = spec.seq_len;
      cp.comm = strategy.context_parallel_comm;
      t->run_options_.cp = &cp;
    }
    if (strategy.expert_parallel > 1) {
      ExpertParallelShard& ep = t->expert_parallel_;
      ep.group = &t->groups_->expert();
      ep.rank = ep.group->rank();
      ep.size = ep.group->size();
      RETURN_IF_ERROR(t->model_->ShardExpertParallel(ep));
      t->run_options_.ep = &ep;
    }
    if (strategy.pipeline_parallel > 1) RETURN_IF_ERROR(t->KeepStageParameters());
    t->model_->to(device);
    if (pure_bf16) t->model_->to(torch::kBFloat16);
    if (strategy.pipeline_parallel == 1) t->parameters_ = t->model_->parameters();
    if (strategy.sequence_parallel) {
      // The weights tensor parallelism did not split see only this rank's
      // slice of the sequence.
      std::vector<torch::Tensor> replicated;
      for (const torch::Tensor& p : t->parameters_) {
        if (p.numel() == full_numel.at(p.unsafeGetTensorImpl())) replicated.push_back(p);
      }
      SumReplicatedGradients(replicated, &t->tensor_parallel_);
    }
  }
  const bool offload = strategy.offload == Offload::kCpu;
  const bool master_copies = pure_bf16 || offload;
  const torch::Device master_device = offload ? torch::Device(torch::kCPU) : device;
  if (strategy.weight_replicas() > 1) {
    // The context-parallel ranks hold the same weights as the data-parallel
    // ones: their gradients are reduced (and their state sharded) together.
    DataParallelOptions options;
    options.sharding = strategy.sharding;
    if (spec.bucket_bytes > 0) options.bucket_bytes = spec.bucket_bytes;
    options.optimizer = strategy.optimizer;
    options.master_copies = master_copies;
    options.master_device = master_device;
    if (t->model_ && strategy.expert_parallel > 1) {
      // Each expert is held by the ranks of its expert-data group only.
      options.expert_group = &t->groups_->expert_data();
      options.expert_params = t->model_->ExpertParameters();
    }
    std::vector<std::vector<torch::Tensor>> layers;
    if (t->model_ && strategy.sharding == Sharding::kFsdp) {
      for (torch::nn::Module* layer : t->model_->Layers()) layers.push_back(layer->parameters());
    }
    t->data_parallel_ = std::make_unique<DataParallel>(&t->groups_->data_context(), t->parameters_,
                                                       layers, options);
    t->run_options_.hooks = t->data_parallel_->hooks();
  } else {
    t->optimizer_ = std::make_unique<TrainingOptimizer>(t->parameters_, strategy.optimizer,
                                                        master_copies, master_device);
  }
  if (strategy.precision == Precision::kFp16)
    t->scaler_ = std::make_unique<DynamicLossScaler>(device);
  if (strategy.pipeline_parallel > 1) {
    PipelineStage::Options options;
    options.schedule = strategy.pipeline_schedule;
    options.virtual_stages = strategy.virtual_stages;
    options.run = t->run_options_;
    options.autocast =
        strategy.precision == Precision::kBf16 || strategy.precision == Precision::kFp16;
    options.autocast_dtype =
        strategy.precision == Precision::kFp16 ? torch::kHalf : torch::kBFloat16;
    if (t->scaler_) {
      DynamicLossScaler* scaler = t->scaler_.get();
      options.scale_loss = [scaler](const torch::Tensor& loss) { return scaler->Scale(loss); };
    }
    t->pipeline_ = std::make_unique<PipelineStage>(t->model_.get(), t->groups_.get(),
                                                   t->data_parallel_.get(), options);
  }

  if (t->scripted_) {
    // The input spec's tensors, seeded per rank and micro-batch.
    for (int i = 0; i < spec.strategy.grad_accum_steps; ++i) {
      t->scripted_inputs_.push_back(t->scripted_->MakeInputs(
          spec.strategy.micro_batch_size, spec.seq_len,
          spec.seed + 1 + uint64_t(t->groups_->layout().dp_rank) * 100003 + uint64_t(i), device,
          pure_bf16 ? std::optional<c10::ScalarType>(torch::kBFloat16) : std::nullopt));
    }
    return t;
  }
  // The same global batch on every rank (seeded), each rank takes its rows
  // (and under context parallelism its share of their positions); seq_len +
  // 1 tokens give seq_len inputs and seq_len targets.
  const int per_rank = spec.strategy.micro_batch_size * spec.strategy.grad_accum_steps;
  const Example batch =
      t->model_->MakeExample(SyntheticTokens(spec.model.vocab_size, spec.global_batch_size,
                                             spec.seq_len + 1, spec.seed + 1),
                             spec.seed + 2);
  const int dp_rank = t->groups_->layout().dp_rank;
  for (int i = 0; i < spec.strategy.grad_accum_steps; ++i) {
    const int64_t first = int64_t{dp_rank} * per_rank + int64_t{i} * spec.strategy.micro_batch_size;
    auto rows = [&](const torch::Tensor& all) {
      return ContextShardOf(all.narrow(0, first, spec.strategy.micro_batch_size), 1,
                            t->run_options_.cp)
          .contiguous()
          .to(device);
    };
    t->inputs_.push_back(rows(batch.input));
    t->targets_.push_back(rows(batch.target));
  }
  return t;
}

absl::Status Trainer::KeepStageParameters() {
  const Strategy& s = spec_.strategy;
  if (!model_->Staged()) {
    return absl::InvalidArgumentError(absl::StrCat("strategy.pipeline_parallel: the ",
                                                   spec_.model.family,
                                                   " family does not run in pipeline stages"));
  }
  const int stages = s.pipeline_parallel, stage = groups_->layout().pp_rank;
  std::unordered_set<const void*> keep;
  auto add = [&](const std::vector<torch::Tensor>& params) {
    for (const torch::Tensor& p : params) keep.insert(p.unsafeGetTensorImpl());
  };
  std::vector<torch::nn::Module*> layers = model_->Layers();
  for (int l : StageLayers(static_cast<int>(layers.size()), stages, s.virtual_stages, stage)) {
    add(layers[l]->parameters());
  }
  if (stage == 0) add(model_->EmbeddingParameters());
  if (stage == stages - 1) add(model_->HeadParameters());
  // A weight both ends use (a tied embedding): its two halves of the
  // gradient meet over the embedding group.
  if (stage == 0 || stage == stages - 1) {
    for (const torch::Tensor& e : model_->EmbeddingParameters()) {
      for (const torch::Tensor& h : model_->HeadParameters()) {
        if (e.is_same(h)) tied_.push_back(e);
      }
    }
  }
  // The rest of the model is another stage's: free it.
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : model_->parameters()) {
    if (keep.count(p.unsafeGetTensorImpl())) {
      parameters_.push_back(p);
    } else {
      p.set_data(torch::empty({0}, p.options()));
    }
  }
  return absl::OkStatus();
}

double Trainer::ForwardBackward() {
  if (data_parallel_) {
    data_parallel_->ZeroGrad();
  } else {
    optimizer_->ZeroGrad();
  }
  if (pipeline_) return PipelineForwardBackward();
  const double scale = 1.0 / static_cast<double>(spec_.strategy.grad_accum_steps);
  const Precision precision = spec_.strategy.precision;
  // bf16 and fp16 keep fp32 weights and let autocast cast per op; the loss
  // stays fp32. pure_bf16 and fp8 run on bf16 weights with autocast off.
  const bool autocast = precision == Precision::kBf16 || precision == Precision::kFp16;
  const c10::ScalarType autocast_dtype =
      precision == Precision::kFp16 ? torch::kHalf : torch::kBFloat16;
  torch::Tensor total = torch::zeros({}, torch::TensorOptions().device(device_));
  const int micro_batches = spec_.strategy.grad_accum_steps;
  for (int i = 0; i < micro_batches; ++i) {
    if (data_parallel_) data_parallel_->BeginForward();
    torch::Tensor loss;
    {
      AutocastScope region(device_.type(), autocast, autocast_dtype);
      loss = (scripted_ ? scripted_->Loss(scripted_inputs_[i])
                        : model_->Loss(inputs_[i], targets_[i], run_options_)) *
             scale;
    }
    if (data_parallel_) data_parallel_->BeginBackward(/*last=*/i == micro_batches - 1);
    (scaler_ ? scaler_->Scale(loss) : loss).backward();
    if (data_parallel_) data_parallel_->EndBackward();
    total += loss.detach();
  }
  // Averaged like the gradients: each context-parallel rank's loss is its
  // share of its sequences' mean times context_parallel.
  Group& data = groups_->data_context();
  if (data.size() > 1) {
    data.AllReduce(total);
    total.div_(data.size());
  }
  return total.item<double>();
}

double Trainer::PipelineForwardBackward() {
  torch::Tensor total = torch::full({}, pipeline_->RunStep(inputs_, targets_),
                                    torch::TensorOptions().dtype(torch::kDouble));
  if (!tied_.empty()) {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : tied_) {
      torch::Tensor grad = p.mutable_grad();
      if (grad.defined()) groups_->embedding().AllReduce(grad);
    }
  }
  // The last stage has the loss; the data- and context-parallel ranks
  // average theirs.
  groups_->pipeline().AllReduce(total);
  Group& data = groups_->data_context();
  if (data.size() > 1) {
    data.AllReduce(total);
    total.div_(data.size());
  }
  return total.item<double>();
}

int64_t Trainer::tokens_per_sample() const {
  return scripted_ ? TokensPerSample(scripted_->spec(), spec_.seq_len) : spec_.seq_len;
}

double Trainer::training_flops_per_token() const {
  return scripted_ ? 6.0 * static_cast<double>(scripted_->ParameterCount())
                   : spec_.model.TrainingFlopsPerToken(spec_.seq_len);
}

double Trainer::Step() {
  const double loss = ForwardBackward();
  if (scaler_) {
    // Every rank must skip the same steps: with sharded gradients or
    // pipeline stages the inf/NaN count is summed over the ranks concerned.
    std::function<void(torch::Tensor&)> combine;
    if (pipeline_) {
      combine = [this](torch::Tensor& found_inf) { groups_->world().AllReduce(found_inf); };
    } else if (data_parallel_) {
      combine = [this](torch::Tensor& found_inf) { data_parallel_->CombineFoundInf(found_inf); };
    }
    const bool skip = scaler_->UnscaleAndUpdate(
        data_parallel_ ? data_parallel_->optimizer_tensors() : parameters_, combine);
    if (skip) {
      ++skipped_steps_;  // inf/NaN gradients: the scale shrank, the weights stay
      return loss;
    }
  }
  if (data_parallel_) {
    data_parallel_->Step();
  } else {
    optimizer_->Step();
  }
  return loss;
}

std::vector<torch::Tensor> Trainer::FullParameters() {
  if (data_parallel_) return data_parallel_->FullParameters();
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : parameters_) out.push_back(p.detach().clone());
  return out;
}

namespace {

TrialResult Failure(TrialStatus status, std::string error) {
  TrialResult r;
  r.status = status;
  r.error = std::move(error);
  return r;
}

// Peak tensor memory of this trial on `device` so far.
int64_t PeakMemoryBytes(const torch::Device& device) {
  return IsCuda(device) ? DeviceAllocatedBytes(device).peak : CpuTensorPeakBytes();
}

// Gloo reports a peer that went away (its process killed, its host gone) as
// a plain exception from its TCP transport: "Connection reset by peer",
// "Connection closed by peer", a timed-out receive. In a multi-rank trial
// that is the gang's loss, not this rank's strategy: if the peer failed by
// its own strategy, its own answer says so and wins at the coordinator.
bool IsPeerLoss(absl::string_view what) {
  return absl::StrContains(what, "gloo/transport") || absl::StrContains(what, "by peer") ||
         absl::StrContains(what, "Connection refused");
}

// The most measured steps min_measured_seconds may extend a trial to.
constexpr int kMaxExtendedSteps = 10000;

// RunTrial's body, unfenced: throws what LibTorch throws.
TrialResult RunTrialUnfenced(const TrialSpec& spec, const torch::Device& device,
                             const StepCallback& on_step) {
  at::set_num_threads(spec.num_threads);
  const bool cuda = IsCuda(device);
  c10::OptionalDeviceGuard device_guard;
  if (cuda) {
    device_guard.reset_device(device);
    torch::empty({1}, torch::TensorOptions().device(device));  // initialises the allocator
    c10::getDeviceAllocator(device.type())->resetPeakStats(device.index());
  }
  // On CPU the counting allocator enforces the limit as tensors are
  // allocated; on CUDA the measured peak is checked after each step.
  ScopedCpuTensorMemoryLimit cpu_limit(cuda ? 0 : spec.memory_limit_bytes);
  ResetCpuPeakBytes();

  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(spec);
  if (!trainer.ok()) {
    TrialResult failed = Failure(TrialStatus::kFailed, std::string(trainer.status().message()));
    // UNAVAILABLE: the rendezvous or the process groups could not be set up
    // (a port taken, a peer that never came), nothing the strategy did.
    failed.infrastructure = trainer.status().code() == absl::StatusCode::kUnavailable;
    return failed;
  }
  // The peak from here on is the training's: building (and, sharded,
  // partitioning) the model is not part of a step.
  if (cuda) {
    c10::getDeviceAllocator(device.type())->resetPeakStats(device.index());
  } else {
    ResetCpuPeakBytes();
  }
  Groups& groups = (*trainer)->groups();

  int total = spec.warmup_steps + spec.measured_steps;
  std::vector<double> times, comm_times, losses;
  times.reserve(spec.measured_steps);
  double loss = 0, measured_seconds = 0;
  int skipped_before_measuring = 0;
  for (int step = 1; step <= total; ++step) {
    if (step == spec.warmup_steps + 1) skipped_before_measuring = (*trainer)->skipped_steps();
    Synchronize(device);
    groups.ResetCommSeconds();
    const auto start = std::chrono::steady_clock::now();
    loss = (*trainer)->Step();
    Synchronize(device);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double comm_seconds = groups.comm_seconds();
    if (groups.world().size() > 1) {
      // The gang is as fast as its slowest rank (outside the timed region).
      torch::Tensor slowest = torch::tensor({seconds, comm_seconds}, torch::kDouble);
      groups.world().AllReduce(slowest, c10d::ReduceOp::MAX);
      seconds = slowest[0].item<double>();
      if (step > spec.warmup_steps) comm_times.push_back(slowest[1].item<double>());
    }
    const bool measured = step > spec.warmup_steps;
    if (measured) {
      times.push_back(seconds);
      measured_seconds += seconds;
      // Too short a measurement is noise: keep measuring until the steps
      // cover min_measured_seconds. Every rank sees the same (all-reduced)
      // step times, so every rank takes the same number of steps.
      if (step == total && measured_seconds < spec.min_measured_seconds &&
          static_cast<int>(times.size()) < kMaxExtendedSteps) {
        ++total;
      }
    }
    if (on_step) on_step(StepReport{step, total, measured, seconds, loss});
    if (!std::isfinite(loss)) {
      return Failure(TrialStatus::kFailed,
                     absl::StrCat("loss is not finite (", loss, ") at step ", step));
    }
    losses.push_back(loss);
    if (cuda && spec.memory_limit_bytes > 0 &&
        DeviceAllocatedBytes(device).peak > spec.memory_limit_bytes) {
      return Failure(
          TrialStatus::kOom,
          absl::StrCat("device memory limit exceeded: peak ", DeviceAllocatedBytes(device).peak,
                       " bytes (limit ", spec.memory_limit_bytes, " bytes)"));
    }
  }

  TrialResult result;
  result.status = TrialStatus::kSucceeded;
  result.step_losses = std::move(losses);
  TrialMetrics& m = result.metrics;
  m.state_memory_bytes = cuda ? DeviceAllocatedBytes(device).current : CpuTensorBytesInUse();
  if (!comm_times.empty()) m.comm_time_s = Median(comm_times);
  if (spec.report_parameter_digest) {
    uint64_t hash = kFnv1a64Offset;
    for (const torch::Tensor& p : (*trainer)->FullParameters()) {
      const torch::Tensor bytes = p.contiguous().cpu();
      hash = Fnv1a64(absl::string_view(static_cast<const char*>(bytes.data_ptr()),
                                       bytes.numel() * bytes.element_size()),
                     hash);
    }
    result.parameter_digest = absl::StrFormat("fnv1a64:%016x", hash);
  }
  SetStepTimeFigures(times, &m);
  const double tokens_per_step =
      double(spec.global_batch_size) * double((*trainer)->tokens_per_sample());
  m.tokens_per_second = tokens_per_step / m.step_time_median_s;
  m.samples_per_second = spec.global_batch_size / m.step_time_median_s;
  m.achieved_tflops =
      (*trainer)->training_flops_per_token() * tokens_per_step / m.step_time_median_s / 1e12;
  m.final_loss = loss;
  m.skipped_steps = (*trainer)->skipped_steps() - skipped_before_measuring;
  // achieved_tflops is the whole gang's, so the peak is too: every rank's
  // device (the spec's peak is one device's).
  m.peak_tflops = spec.peak_tflops.For(spec.strategy.precision) * spec.world_size;
  if (m.peak_tflops > 0) m.mfu = m.achieved_tflops / m.peak_tflops;
  return result;
}

}  // namespace

TrialResult RunTrial(const TrialSpec& spec, const StepCallback& on_step) {
  TrialResult result;
  std::optional<torch::Device> device;
  if (absl::Status s = ValidateTrialSpec(spec); !s.ok()) {
    result = Failure(TrialStatus::kFailed, std::string(s.message()));
  } else if (absl::Status s = InstallCountingCpuAllocator(); !s.ok()) {
    result = Failure(TrialStatus::kFailed, std::string(s.message()));
  } else {
    // The one fence: nothing LibTorch throws gets past here.
    try {
      absl::StatusOr<torch::Device> parsed = ParseDevice(spec.device);
      if (parsed.ok()) {
        device = *parsed;
        result = RunTrialUnfenced(spec, *device, on_step);
      } else {
        result = Failure(TrialStatus::kFailed, std::string(parsed.status().message()));
      }
    } catch (const c10::OutOfMemoryError& e) {
      result = Failure(TrialStatus::kOom, e.what_without_backtrace());
    } catch (const c10::DistError& e) {
      result = Failure(TrialStatus::kFailed, e.what_without_backtrace());
      result.infrastructure = spec.world_size > 1;
    } catch (const c10::Error& e) {
      result = Failure(TrialStatus::kFailed, e.what_without_backtrace());
    } catch (const std::bad_alloc& e) {
      result = Failure(TrialStatus::kOom, absl::StrCat("out of host memory (", e.what(), ")"));
    } catch (const std::exception& e) {
      result = Failure(TrialStatus::kFailed, e.what());
      result.infrastructure = spec.world_size > 1 && IsPeerLoss(e.what());
    } catch (...) {
      result = Failure(TrialStatus::kFailed, "unknown exception");
    }
  }
  if (device) {
    try {
      result.metrics.peak_memory_bytes = PeakMemoryBytes(*device);
      // Give the device back clean: cached blocks return to the driver (an
      // OOM leaves the most behind), so the next trial starts from empty.
      if (IsCuda(*device)) c10::getDeviceAllocator(device->type())->emptyCache();
    } catch (...) {
      // Statistics unavailable; leave 0 rather than fail the trial.
    }
  }
  result.metrics.peak_rss_bytes = PeakRssBytes();
  return result;
}

}  // namespace autoaccel
