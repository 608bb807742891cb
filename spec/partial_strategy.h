// A partial strategy: some of a strategy's fields, the others left to the
// search (--load-strategy, ATorch's load_strategy). Its fields follow the
// table of spec/strategy_fields.h. PartialStrategyBuilder collects one from
// the pieces of an input, refusing a field set twice to different values.
// Values only: no I/O, and any thread may use them (a builder is one
// thread's at a time).
#ifndef AUTOACCEL_SPEC_PARTIAL_STRATEGY_H_
#define AUTOACCEL_SPEC_PARTIAL_STRATEGY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spec/strategy.h"

namespace autoaccel {

// Some of a strategy's fields; an unset field matches any value.
struct PartialStrategy {
  std::optional<int> data_parallel, tensor_parallel, pipeline_parallel, virtual_stages,
      micro_batch_size, grad_accum_steps, checkpoint_percent, context_parallel, expert_parallel;
  std::optional<Sharding> sharding;
  std::optional<PipelineSchedule> pipeline_schedule;
  std::optional<bool> sequence_parallel;
  std::optional<ContextParallelComm> context_parallel_comm;
  std::optional<Precision> precision;
  std::optional<Checkpointing> checkpointing;
  std::optional<Attention> attention;
  std::optional<Optimizer> optimizer;
  std::optional<Offload> offload;

  bool empty() const { return CountSet() == 0; }
  int CountSet() const;
  // Every set field equals the strategy's.
  bool Matches(const Strategy& s) const;
  // The set fields as canonical text keys, in the canonical text's order:
  //   "sharding=zero2,precision=bf16,checkpoint=full"
  // ("sp=1" / "sp=0" for sequence_parallel; "" when nothing is set).
  // ParseLoadStrategy reads it back to an equal value.
  std::string ToText() const;

  friend bool operator==(const PartialStrategy& a, const PartialStrategy& b);
  friend bool operator!=(const PartialStrategy& a, const PartialStrategy& b) { return !(a == b); }
};

// Collects the fields of one input. Fields are named by their row's `name`
// (the JSON key: "data_parallel", "precision", ...). Errors are
// INVALID_ARGUMENT naming the field in the spelling of `form` ("dp" or
// "data_parallel"), e.g.
//   "strategy.dp: expected a positive integer, got '0'"
//   "strategy.ckpt_pct: expected a percentage in 1..100, got 101"
//   "strategy.precision: unknown value 'fp4' (allowed: fp32, bf16, fp16, pure_bf16, fp8)"
//   "conflicting settings of sharding: 'zero1' sets zero1, 'zero2' sets zero2"
// Setting a field twice to the same value is no error. Naming a field that
// has no row, or one of another kind, is a caller's bug (INTERNAL).
class PartialStrategyBuilder {
 public:
  explicit PartialStrategyBuilder(StrategyForm form) : form_(form) {}

  // A count (int row) as read, range-checked here: 1 up to the row's max.
  // `shown` is how the input spelled it, for messages; `origin` what set it
  // ("'dp=2'", "'parallel_mode'"), for conflict messages.
  absl::Status SetCount(absl::string_view field, int64_t value, absl::string_view shown,
                        absl::string_view origin);
  // A flag (bool row).
  absl::Status SetFlag(absl::string_view field, bool value, absl::string_view origin);
  // An enumerator (enum row) by its name.
  absl::Status SetChoice(absl::string_view field, absl::string_view name, absl::string_view origin);

  // The fields set so far, if they leave room for a valid strategy: the unset
  // ones are filled with values that suit the set ones and the strategy's own
  // checks apply (CheckLayout, CheckCheckpointPercent), so an error can only
  // name a set field.
  absl::StatusOr<PartialStrategy> Finish() const;

 private:
  StrategyForm form_;
  PartialStrategy p_;
  std::map<std::string, std::string, std::less<>> origins_;  // by field: what set it first
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_PARTIAL_STRATEGY_H_
