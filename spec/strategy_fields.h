// The strategy's fields as data: one row per field of Strategy, in the
// canonical text's key order. Every form of a strategy is written and read by
// walking this table rather than by naming fields:
//   - the canonical text and the JSON form (strategy.cc),
//   - the partial strategy of --load-strategy (partial_strategy.cc,
//     load_strategy.cc),
//   - the wire form, v1::Strategy (proto/convert.cc, by protobuf reflection on
//     the rows' names; strategy_fields_test checks that every proto field but
//     `text` has a row and every row a proto field of the matching type).
//
// Adding a dimension (say context parallelism) is: the member in Strategy and
// in PartialStrategy, the field in autoaccel.proto, a row here, and its rules
// (CheckLayout in strategy.cc, the search space's rules in space.cc). Nothing
// here is mutable; everything may be used from any thread.
#ifndef AUTOACCEL_SPEC_STRATEGY_FIELDS_H_
#define AUTOACCEL_SPEC_STRATEGY_FIELDS_H_

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spec/field_table.h"
#include "spec/partial_strategy.h"
#include "spec/strategy.h"

namespace autoaccel {

// The enumerators' names, in declaration order. Stable: stored texts, JSON
// and the wire use them.
inline constexpr std::pair<Precision, absl::string_view> kPrecisionNames[] = {
    {Precision::kFp32, "fp32"},
    {Precision::kBf16, "bf16"},
    {Precision::kFp16, "fp16"},
    {Precision::kPureBf16, "pure_bf16"},
    {Precision::kFp8, "fp8"}};
inline constexpr std::pair<Checkpointing, absl::string_view> kCheckpointingNames[] = {
    {Checkpointing::kNone, "none"},
    {Checkpointing::kSelective, "selective"},
    {Checkpointing::kFull, "full"}};
inline constexpr std::pair<Attention, absl::string_view> kAttentionNames[] = {
    {Attention::kMath, "math"}, {Attention::kSdpa, "sdpa"}};
inline constexpr std::pair<Optimizer, absl::string_view> kOptimizerNames[] = {
    {Optimizer::kAdamW, "adamw"}, {Optimizer::kFusedAdamW, "fused_adamw"}};
inline constexpr std::pair<Offload, absl::string_view> kOffloadNames[] = {{Offload::kNone, "none"},
                                                                          {Offload::kCpu, "cpu"}};
inline constexpr std::pair<Sharding, absl::string_view> kShardingNames[] = {
    {Sharding::kNone, "none"},
    {Sharding::kZero1, "zero1"},
    {Sharding::kZero2, "zero2"},
    {Sharding::kFsdp, "fsdp"}};
inline constexpr std::pair<PipelineSchedule, absl::string_view> kPipelineScheduleNames[] = {
    {PipelineSchedule::k1F1B, "1f1b"}, {PipelineSchedule::kInterleaved, "interleaved"}};
inline constexpr std::pair<ContextParallelComm, absl::string_view> kContextParallelCommNames[] = {
    {ContextParallelComm::kP2p, "p2p"}, {ContextParallelComm::kAllGather, "all_gather"}};

// When the canonical text writes a field. A strategy is single-rank when
// every kLayout and kLayoutIfSet field holds its default (Strategy{}'s
// value); single-rank texts are exactly those written before layouts
// existed, so stored answers keep matching.
enum class TextRule {
  kAlways,
  kLayout,             // unless the strategy is single-rank
  kLayoutIfSet,        // only when not the default ("sp=1")
  kIfSet,              // only when not the default ("ckpt_pct=50")
  kIfPipelined,        // only when pipeline_parallel > 1
  kIfInterleaved,      // only when pipeline_parallel > 1 and the schedule is interleaved
  kIfContextParallel,  // only when context_parallel > 1
};

// What an unset v1::Strategy field (0, "") means on input.
enum class ProtoUnset {
  kDefault,  // the field's default: messages from before it existed still convert
  kInvalid,  // an error (the fields every message has had)
};

// One field. T is int (a positive count; the proto's int32), bool (the
// proto's bool; "1"/"0" in the text form) or an enumeration (its name; the
// proto's string).
template <typename T>
struct StrategyField {
  using Value = T;
  absl::string_view name;      // JSON key, proto field and C++ member name
  absl::string_view text_key;  // canonical text key
  T Strategy::*member;
  std::optional<T> PartialStrategy::*partial;
  TextRule text;
  ProtoUnset proto_unset;
  // Enumerations: every enumerator and its name.
  absl::Span<const std::pair<T, absl::string_view>> names = {};
  // Counts: a percentage, 1..100 (a partial strategy checks the range as it
  // reads it; a whole strategy by CheckCheckpointPercent).
  bool percent = false;
};

inline constexpr std::tuple kStrategyFields{
    StrategyField<int>{"data_parallel", "dp", &Strategy::data_parallel,
                       &PartialStrategy::data_parallel, TextRule::kLayout, ProtoUnset::kDefault},
    StrategyField<int>{"tensor_parallel", "tp", &Strategy::tensor_parallel,
                       &PartialStrategy::tensor_parallel, TextRule::kLayout, ProtoUnset::kDefault},
    StrategyField<int>{"pipeline_parallel", "pp", &Strategy::pipeline_parallel,
                       &PartialStrategy::pipeline_parallel, TextRule::kLayout,
                       ProtoUnset::kDefault},
    StrategyField<Sharding>{"sharding", "sharding", &Strategy::sharding, &PartialStrategy::sharding,
                            TextRule::kLayout, ProtoUnset::kDefault, kShardingNames},
    StrategyField<bool>{"sequence_parallel", "sp", &Strategy::sequence_parallel,
                        &PartialStrategy::sequence_parallel, TextRule::kLayoutIfSet,
                        ProtoUnset::kDefault},
    StrategyField<int>{"context_parallel", "cp", &Strategy::context_parallel,
                       &PartialStrategy::context_parallel, TextRule::kLayoutIfSet,
                       ProtoUnset::kDefault},
    StrategyField<ContextParallelComm>{
        "context_parallel_comm", "cp_comm", &Strategy::context_parallel_comm,
        &PartialStrategy::context_parallel_comm, TextRule::kIfContextParallel, ProtoUnset::kDefault,
        kContextParallelCommNames},
    StrategyField<int>{"expert_parallel", "ep", &Strategy::expert_parallel,
                       &PartialStrategy::expert_parallel, TextRule::kLayoutIfSet,
                       ProtoUnset::kDefault},
    StrategyField<PipelineSchedule>{"pipeline_schedule", "pp_schedule",
                                    &Strategy::pipeline_schedule,
                                    &PartialStrategy::pipeline_schedule, TextRule::kIfPipelined,
                                    ProtoUnset::kDefault, kPipelineScheduleNames},
    StrategyField<int>{"virtual_stages", "vpp", &Strategy::virtual_stages,
                       &PartialStrategy::virtual_stages, TextRule::kIfInterleaved,
                       ProtoUnset::kDefault},
    StrategyField<int>{"micro_batch_size", "mbs", &Strategy::micro_batch_size,
                       &PartialStrategy::micro_batch_size, TextRule::kAlways, ProtoUnset::kInvalid},
    StrategyField<int>{"grad_accum_steps", "ga", &Strategy::grad_accum_steps,
                       &PartialStrategy::grad_accum_steps, TextRule::kAlways, ProtoUnset::kInvalid},
    StrategyField<Precision>{"precision", "precision", &Strategy::precision,
                             &PartialStrategy::precision, TextRule::kAlways, ProtoUnset::kInvalid,
                             kPrecisionNames},
    StrategyField<Checkpointing>{"checkpointing", "checkpoint", &Strategy::checkpointing,
                                 &PartialStrategy::checkpointing, TextRule::kAlways,
                                 ProtoUnset::kInvalid, kCheckpointingNames},
    StrategyField<int>{"checkpoint_percent",
                       "ckpt_pct",
                       &Strategy::checkpoint_percent,
                       &PartialStrategy::checkpoint_percent,
                       TextRule::kIfSet,
                       ProtoUnset::kDefault,
                       {},
                       /*percent=*/true},
    StrategyField<Attention>{"attention", "attention", &Strategy::attention,
                             &PartialStrategy::attention, TextRule::kAlways, ProtoUnset::kInvalid,
                             kAttentionNames},
    StrategyField<Optimizer>{"optimizer", "optimizer", &Strategy::optimizer,
                             &PartialStrategy::optimizer, TextRule::kAlways, ProtoUnset::kDefault,
                             kOptimizerNames},
    StrategyField<Offload>{"offload", "offload", &Strategy::offload, &PartialStrategy::offload,
                           TextRule::kAlways, ProtoUnset::kDefault, kOffloadNames},
};

inline constexpr size_t kNumStrategyFields = std::tuple_size_v<decltype(kStrategyFields)>;

// The key of `field` in the spelling of `form`.
template <typename T>
absl::string_view FieldKey(const StrategyField<T>& field, StrategyForm form) {
  return form == StrategyForm::kText ? field.text_key : field.name;
}

// The key of the row whose member is `member`, in the spelling of `form`.
// REQUIRES: `member` has a row.
template <typename T>
absl::string_view FieldKey(T Strategy::*member, StrategyForm form) {
  absl::string_view key;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    if constexpr (std::is_same_v<RowValue<decltype(field)>, T>) {
      if (field.member == member) key = FieldKey(field, form);
    }
  });
  return key;
}

// The name of enumerator `value` ("?" when the row lacks it).
template <typename T>
absl::string_view ChoiceName(const StrategyField<T>& field, T value) {
  for (const auto& [v, name] : field.names) {
    if (v == value) return name;
  }
  return "?";
}

// The canonical text's spelling of a value: a count as its number, a flag as
// 1 or 0, an enumerator as its name.
template <typename T>
std::string FieldText(const StrategyField<T>& field, T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "1" : "0";
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(ChoiceName(field, value));
  } else {
    return absl::StrCat(value);
  }
}

// The enumerator named `name` (exact spelling) among `names`, or
// INVALID_ARGUMENT "strategy.<key>: unknown value 'x' (allowed: a, b, c)".
template <typename T>
absl::StatusOr<T> ParseChoice(absl::Span<const std::pair<T, absl::string_view>> names,
                              absl::string_view key, absl::string_view name) {
  for (const auto& [v, n] : names) {
    if (n == name) return v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("strategy.", key, ": unknown value '", name, "' (allowed: ",
                   absl::StrJoin(names, ", ",
                                 [](std::string* out, const auto& entry) {
                                   out->append(entry.second.data(), entry.second.size());
                                 }),
                   ")"));
}
template <typename T>
absl::StatusOr<T> ParseChoice(const StrategyField<T>& field, absl::string_view key,
                              absl::string_view name) {
  return ParseChoice(field.names, key, name);
}

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_STRATEGY_FIELDS_H_
