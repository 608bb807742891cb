// The strategy value type: one point of the search space.
//
// A strategy has exactly one canonical text form and one JSON form; both parse
// back to an equal value (see strategy_test). It covers the parallel layout
// (data, tensor and pipeline degrees, ZeRO sharding, pipeline schedule,
// sequence parallelism) and the per-rank training choices. Field names in the
// JSON form are a stable, user-visible contract: add keys, never rename them.
// The forms are written and read by walking the field table of
// spec/strategy_fields.h (a row per field: its keys, its kind, when the
// canonical text writes it); a new field is a row there. Values only: any
// thread.
#ifndef AUTOACCEL_SPEC_STRATEGY_H_
#define AUTOACCEL_SPEC_STRATEGY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

// How weights, activations and gradients are stored and computed.
enum class Precision {
  kFp32,      // "fp32": everything fp32
  kBf16,      // "bf16": fp32 weights, bf16 autocast (per-op casts), no loss scaling
  kFp16,      // "fp16": fp32 weights, fp16 autocast, dynamic loss scaling (skip on inf/nan)
  kPureBf16,  // "pure_bf16": bf16 weights, activations and gradients; the optimizer
              // updates an fp32 master copy and writes it back rounded to bf16
  kFp8,       // "fp8": pure_bf16, with the transformer layers' linear layers computed
              // in fp8 (inputs and weights e4m3, output gradients e5m2, one scale per
              // tensor from its current absolute maximum); needs fp8 matrix units
};
// Which activations are dropped after the forward pass and recomputed in
// backward, in the layers that checkpoint_percent selects.
enum class Checkpointing {
  kNone,       // "none": keep everything
  kSelective,  // "selective": the attention core (scores, softmax, weighted sum) only
  kFull,       // "full": the whole transformer layer
};
enum class Attention { kMath, kSdpa };  // "math": spelled out; "sdpa": fused kernel
enum class Optimizer {
  kAdamW,       // "adamw": one parameter at a time (torch::optim::AdamW)
  kFusedAdamW,  // "fused_adamw": one fused ATen kernel over all parameters (_fused_adamw_)
};
enum class Offload {
  kNone,  // "none": optimizer state on the training device
  kCpu,   // "cpu": fp32 master weights and AdamW moments in host memory; gradients go
          // to the host, the optimizer steps there, weights come back
};

// How a data-parallel group shares the model state (ZeRO stages).
enum class Sharding {
  kNone,   // "none": every data-parallel rank holds parameters, gradients and optimizer state
  kZero1,  // "zero1": optimizer state (and fp32 masters) sharded over the data-parallel ranks
  kZero2,  // "zero2": gradients reduce-scattered and sharded too
  kFsdp,   // "fsdp": parameters sharded as well (ZeRO-3), gathered per layer for forward
           // and backward and freed after
};
// How the ranks of a context-parallel group exchange keys and values for
// attention (Megatron's --cp-comm-type).
enum class ContextParallelComm {
  kP2p,        // "p2p": a ring; each step passes one rank's K/V block to the next rank
               // while attending to the block in hand (overlapped)
  kAllGather,  // "all_gather": every rank gathers the whole sequence's K/V, then attends
};
// Order in which a pipeline stage runs the forward and backward passes of
// the step's micro-batches.
enum class PipelineSchedule {
  k1F1B,         // "1f1b": warm-up forwards, then one forward one backward, then cool-down
  kInterleaved,  // "interleaved": 1F1B over virtual_stages model chunks per rank (smaller bubble)
};

// User-facing names, as in the lists above.
absl::string_view PrecisionName(Precision p);
absl::string_view CheckpointingName(Checkpointing c);
absl::string_view AttentionName(Attention a);
absl::string_view OptimizerName(Optimizer o);
absl::string_view OffloadName(Offload o);
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
absl::StatusOr<Checkpointing> ParseCheckpointing(absl::string_view name);
absl::StatusOr<Attention> ParseAttention(absl::string_view name);
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name);
absl::StatusOr<Offload> ParseOffload(absl::string_view name);
absl::string_view ShardingName(Sharding s);
absl::string_view PipelineScheduleName(PipelineSchedule p);
absl::StatusOr<Sharding> ParseSharding(absl::string_view name);
absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view name);
absl::string_view ContextParallelCommName(ContextParallelComm c);
absl::StatusOr<ContextParallelComm> ParseContextParallelComm(absl::string_view name);

// Every enumerator of each dimension, in declaration order.
const std::vector<Precision>& AllPrecisions();
const std::vector<Checkpointing>& AllCheckpointings();
const std::vector<Attention>& AllAttentions();
const std::vector<Optimizer>& AllOptimizers();
const std::vector<Offload>& AllOffloads();
const std::vector<Sharding>& AllShardings();
const std::vector<PipelineSchedule>& AllPipelineSchedules();
const std::vector<ContextParallelComm>& AllContextParallelComms();

// True for the precisions that compute in bf16 (bf16, pure_bf16, and fp8
// outside its linear layers).
bool UsesBf16(Precision p);
// True for the precisions that keep bf16 weights and gradients, with fp32
// master copies in the optimizer (pure_bf16, fp8).
bool KeepsBf16Weights(Precision p);

struct Strategy {
  // Parallel layout: data_parallel * context_parallel * tensor_parallel *
  // pipeline_parallel == the trial's world size. Ranks are numbered
  // tensor-parallel fastest, then context-parallel, then data-parallel, then
  // pipeline stage (Megatron's tp-cp-dp-pp order):
  //   rank = ((pp_rank * data_parallel + dp_rank) * context_parallel + cp_rank)
  //          * tensor_parallel + tp_rank.
  int data_parallel = 1;
  int tensor_parallel = 1;    // Megatron-style column/row-parallel layers
  int pipeline_parallel = 1;  // pipeline stages
  // How the data-parallel and context-parallel ranks (which hold the same
  // weights) share the model state: kNone whenever data_parallel *
  // context_parallel == 1.
  Sharding sharding = Sharding::kNone;
  // Pipeline schedule and model chunks per rank: k1F1B with 1 chunk, or
  // kInterleaved with >= 2. Always k1F1B / 1 when pipeline_parallel == 1.
  PipelineSchedule pipeline_schedule = PipelineSchedule::k1F1B;
  int virtual_stages = 1;
  // Megatron sequence parallelism: layer norms and residuals split along the
  // sequence over the tensor-parallel ranks. Only with tensor_parallel > 1.
  bool sequence_parallel = false;
  // Context parallelism: each sample's sequence split over this many ranks in
  // 2 * context_parallel load-balanced chunks (rank c holds chunks c and
  // 2 * context_parallel - 1 - c), attention computed over the whole sequence
  // by exchanging keys and values as context_parallel_comm says. The ranks
  // of a context-parallel group train on the same samples and reduce their
  // gradients with the data-parallel ranks.
  int context_parallel = 1;
  ContextParallelComm context_parallel_comm = ContextParallelComm::kP2p;  // p2p when cp == 1
  // Expert parallelism (mixture-of-experts families): each expert lives on
  // one of this many ranks, which dispatch their tokens to the experts'
  // ranks and combine the outputs (all-to-all). The expert-parallel ranks
  // are consecutive data-and-context-parallel ranks (Megatron's layout with
  // the expert tensor-parallel size equal to tensor_parallel), so
  // expert_parallel divides weight_replicas() and adds no ranks; an
  // expert's weights are replicated over expert_replicas() ranks, which
  // reduce (and shard) their gradients together.
  int expert_parallel = 1;

  // global batch = micro_batch_size * grad_accum_steps * data_parallel.
  int micro_batch_size = 1;  // samples per forward/backward on one rank
  int grad_accum_steps = 1;  // micro-batches per optimizer step (pipeline: per step in flight)
  Precision precision = Precision::kFp32;
  Checkpointing checkpointing = Checkpointing::kNone;
  // Share of the transformer layers that `checkpointing` applies to, in
  // percent (1..100): the first ceil(L * percent / 100) of L layers. Always
  // 100 when checkpointing is kNone (the only canonical value there).
  int checkpoint_percent = 100;
  Attention attention = Attention::kMath;
  Optimizer optimizer = Optimizer::kAdamW;
  Offload offload = Offload::kNone;

  // Every field equal (the rows of spec/strategy_fields.h).
  friend bool operator==(const Strategy& a, const Strategy& b);
  friend bool operator!=(const Strategy& a, const Strategy& b) { return !(a == b); }

  int world_size() const {
    return data_parallel * context_parallel * tensor_parallel * pipeline_parallel;
  }
  // The ranks that hold the same weights, data_parallel * context_parallel:
  // gradients are reduced, and sharding divides the model state, over them.
  int weight_replicas() const { return data_parallel * context_parallel; }
  // The ranks that hold the same experts: weight_replicas() / expert_parallel.
  int expert_replicas() const { return weight_replicas() / expert_parallel; }
};

// The rules that make checkpoint_percent meaningful and each strategy's forms
// unique: 1..100, and exactly 100 when checkpointing is kNone. OK, or
// INVALID_ARGUMENT "strategy.<key>: ..." (key: the name the caller's input
// uses, "ckpt_pct" in the text form). Every parser and the search space's
// "checkpoint_percent" rule apply this one check.
absl::Status CheckCheckpointPercent(const Strategy& s,
                                    absl::string_view key = "checkpoint_percent");

// Which spelling of the keys an error message uses: the JSON form's (also the
// proto's and the C++ fields': "data_parallel", "pipeline_schedule", ...) or
// the canonical text's ("dp", "pp_schedule", ...).
enum class StrategyForm { kJson, kText };

// The rules that make a parallel layout meaningful and its forms unique:
//   - data_parallel, tensor_parallel, pipeline_parallel, virtual_stages >= 1;
//   - sharding is none when data_parallel == 1 (nothing to shard over);
//   - sequence_parallel only with tensor_parallel > 1;
//   - pipeline_parallel == 1: pipeline_schedule 1f1b and virtual_stages 1;
//   - 1f1b: virtual_stages 1; interleaved: virtual_stages >= 2.
// Says nothing of the world size or the model (see the search space's rules).
// OK, or INVALID_ARGUMENT "strategy.<key>: ..." naming the offending key in
// the spelling of `form`. Every parser and the search space's "layout" rule
// apply this one check.
absl::Status CheckLayout(const Strategy& s, StrategyForm form = StrategyForm::kJson);

// Canonical text, keys in a fixed order. A single-rank strategy (data,
// tensor and pipeline parallel 1, sharding none, no sequence parallelism):
//   "mbs=4,ga=2,precision=bf16,checkpoint=full,attention=sdpa,optimizer=adamw,offload=none"
// with ",ckpt_pct=P" after "checkpoint=..." only when checkpoint_percent is
// not 100. Any other layout is prefixed with "dp=D,tp=T,pp=P,sharding=S",
// then ",sp=1" when sequence_parallel, then, when pp > 1,
// ",pp_schedule=1f1b" or ",pp_schedule=interleaved,vpp=V":
//   "dp=2,tp=2,pp=1,sharding=zero1,sp=1,mbs=4,ga=2,..."
//   "dp=1,tp=1,pp=4,sharding=none,pp_schedule=interleaved,vpp=2,mbs=1,ga=8,..."
// (Single-rank texts are exactly those written before layouts existed, so
// stored answers keep matching.)
std::string StrategyToText(const Strategy& s);

// Parses the canonical text. Keys may come in any order; a missing key keeps
// its default (texts written before a dimension existed still parse). Layout
// keys: dp, tp, pp, vpp (positive integers), sharding, sp (0 or 1),
// pp_schedule. Unknown keys, bad values, non-positive sizes, a percent
// outside 1..100, a percent other than 100 with checkpoint=none and a layout
// that CheckLayout() refuses give INVALID_ARGUMENT naming the key.
absl::StatusOr<Strategy> ParseStrategyText(absl::string_view text);

// JSON form, every key always present:
//   {"data_parallel":2,"tensor_parallel":1,"pipeline_parallel":1,
//    "sharding":"zero1","pipeline_schedule":"1f1b","virtual_stages":1,
//    "sequence_parallel":false,
//    "micro_batch_size":4,"grad_accum_steps":2,"precision":"bf16",
//    "checkpointing":"full","checkpoint_percent":100,"attention":"sdpa",
//    "optimizer":"adamw","offload":"none"}
nlohmann::json StrategyToJson(const Strategy& s);

// Inverse of StrategyToJson; same error rules as ParseStrategyText. Missing
// keys read as their defaults (JSON written before the layout keys existed
// is a single-rank strategy).
absl::StatusOr<Strategy> StrategyFromJson(const nlohmann::json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_STRATEGY_H_
