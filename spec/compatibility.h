// Whether a strategy can train a model on a cluster at all: the compatibility
// rules, one table of named checks (CompatibilityRules()), shared by the
// search space (which enumerates only what they allow), the trial runner
// (which refuses what they refuse) and estimate.
//
// Pure functions: no I/O, no global state; safe to call from any thread.
#ifndef AUTOACCEL_SPEC_COMPATIBILITY_H_
#define AUTOACCEL_SPEC_COMPATIBILITY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"

namespace autoaccel {

// What a strategy has to fit: the model, the batch, the cluster, what the
// device can run and who runs the trials. (search/space.h's SpaceRequest
// extends it with the candidate values of a search.)
struct TrainingSetup {
  ModelSpec model;
  int seq_len = 0;            // tokens per sample; 0 < seq_len <= model.MaxSeqLen()
  int global_batch_size = 0;  // samples per optimizer step, summed over data-parallel ranks
  // Ranks of every trial: each strategy's data_parallel * tensor_parallel *
  // pipeline_parallel (the size of the cluster the user will train on).
  int world_size = 1;
  // bf16, pure_bf16 and fp8 need it.
  bool device_supports_bf16 = true;
  // fp8 needs it: fp8 matrix units (CUDA compute capability 8.9 or newer),
  // or a CPU device (LibTorch computes the scaled matrix products there).
  bool device_supports_fp8 = true;
  // True for an accelerator (cuda), false for a CPU device. offload=cpu
  // needs it: on a CPU device the optimizer state already lives in host
  // memory.
  bool device_is_accelerator = false;
  // True when autoaccel's engine runs the trials; false for a launcher's
  // (the user's own training script): then the rules about what the engine
  // can build ("fixed_graph", "parallel_family") do not apply (the user's
  // framework decides, and the export format says what it refuses), and a
  // model whose layers are unknown (no config given) has no layer count to
  // check ("pipeline_layers").
  bool engine_runs_trials = true;
};

// One compatibility rule. `check` returns OK when the strategy may run under
// the setup, else INVALID_ARGUMENT whose message starts with
// "strategy.<field>: " and says why. Rules assume nothing of each other.
struct CompatibilityRule {
  absl::string_view name;  // stable id, e.g. "batch_product"
  absl::Status (*check)(const TrainingSetup& setup, const Strategy& strategy);
  // True for the rules that read only the setup's device facts
  // (device_supports_bf16, device_supports_fp8, device_is_accelerator): what
  // CheckDeviceRules applies once the devices are known.
  bool device = false;
};

// The rules CheckCompatible() applies, in order:
//   "positive_sizes"      micro_batch_size and grad_accum_steps are positive;
//   "known_values"        every enumeration of the field table
//                         (spec/strategy_fields.h) holds one of its
//                         enumerators;
//   "checkpoint_percent"  checkpoint_percent is in 1..100, and 100 when
//                         checkpointing is none;
//   "layout"              CheckLayout(): degrees >= 1, sharding only with
//                         data_parallel * context_parallel > 1,
//                         expert_parallel dividing data_parallel *
//                         context_parallel,
//                         context_parallel_comm p2p unless
//                         context_parallel > 1, sequence_parallel only with
//                         tensor_parallel > 1, the schedule and
//                         virtual_stages consistent with pipeline_parallel;
//   "layout_product"      data_parallel * context_parallel *
//                         tensor_parallel * pipeline_parallel == world_size;
//   "batch_product"       micro_batch_size * grad_accum_steps *
//                         data_parallel == global_batch_size;
//   "bf16_device"         bf16, pure_bf16 and fp8 need device_supports_bf16;
//   "fp8_device"          fp8 needs device_supports_fp8;
//   "offload_device"      offload=cpu needs device_is_accelerator;
//   "fixed_graph"         a torchscript model allows checkpointing none,
//                         attention math only and no fp8 (its forward is
//                         the user's code: no layers to checkpoint, its own
//                         attention and linear layers);
//                         not for a launcher's trials (engine_runs_trials);
//   "parallel_family"     tensor_parallel > 1 or pipeline_parallel > 1 only
//                         for the families whose row says so (gpt2 and
//                         every decoder; torchscript and bert run data
//                         parallel only, with any sharding); not for a
//                         launcher's trials;
//   "attention_kernel"    sdpa only for a model that does not soft-cap its
//                         attention scores (attn_logit_softcapping, gemma2)
//                         nor has attention sinks (gpt_oss): the fused
//                         kernel cannot (ModelSpec::SdpaComputes);
//   "tensor_parallel_model" tensor_parallel divides the attention heads
//                         (n_head), the key-value heads (n_kv_head, llama
//                         and mixtral), the expert width (ExpertWidth(),
//                         models with experts) and the MLP inner size
//                         (n_inner); the
//                         vocabulary need not divide (the engine pads it);
//   "pipeline_layers"     (when the model's layers are known) with
//                         pipeline_parallel > 1: pipeline_parallel *
//                         virtual_stages <= n_layer; interleaved also needs
//                         n_layer divisible by pipeline_parallel *
//                         virtual_stages and grad_accum_steps divisible by
//                         pipeline_parallel;
//   "pipeline_sharding"   with pipeline_parallel > 1 the sharding is none or
//                         zero1 (zero2 and fsdp reduce gradients per
//                         micro-batch, which pipeline stages interleave; as
//                         DeepSpeed, which allows only ZeRO-1 with pipelines);
//   "sequence_parallel"   sequence parallelism needs seq_len /
//                         context_parallel divisible by tensor_parallel
//                         (each rank keeps a slice of it);
//   "context_parallel_family" context_parallel > 1 only for the families
//                         whose row says context_parallel (the causal
//                         decoders; not bert, torchscript); not for a
//                         launcher's trials;
//   "context_parallel_sequence" seq_len divisible by 2 * context_parallel
//                         (two load-balanced chunks per rank);
//   "context_parallel_kernel" context_parallel_comm p2p with attention math
//                         only (the trial runner's ring computes its blocks
//                         with the math kernel); not for a launcher's
//                         trials;
//   "expert_parallel_model" expert_parallel > 1 only for a family with
//                         experts (mixtral), dividing its num_local_experts;
//                         not for a launcher's trials.
// A search's per-dimension candidate lists (search/space.h's SpaceRequest)
// are a choice of the user, not a compatibility rule: a strategy outside them
// can still be compatible.
absl::Span<const CompatibilityRule> CompatibilityRules();

// OK, or the first failing rule's INVALID_ARGUMENT. Does not validate the
// setup itself (search/space.h's ValidateSpaceRequest does, for a search).
absl::Status CheckCompatible(const TrainingSetup& setup, const Strategy& strategy);

// The device rules alone ("bf16_device", "fp8_device", "offload_device"),
// which read nothing of `setup` but its device facts: OK or the first
// failing one's INVALID_ARGUMENT.
absl::Status CheckDeviceRules(const TrainingSetup& setup, const Strategy& strategy);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_COMPATIBILITY_H_
