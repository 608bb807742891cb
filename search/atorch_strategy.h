// ATorch's strategy list (auto_accelerate's load_strategy), read into a
// partial strategy: the '[' / '(' form of --load-strategy (load_strategy.h).
// Pure; any thread.
#ifndef AUTOACCEL_SEARCH_ATORCH_STRATEGY_H_
#define AUTOACCEL_SEARCH_ATORCH_STRATEGY_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spec/partial_strategy.h"

namespace autoaccel {

// `text` is a Python literal (search/python_literal.h) whose value is a list
// (or tuple) whose elements are a method name or a (name, config[, tunable])
// tuple:
//   ["zero2", ("amp_native", {"dtype": torch.bfloat16}), "checkpoint"]
// Method names are case-insensitive and map to fields:
//   zero1 / zero2 / fsdp -> sharding (config ignored);
//   amp_native -> precision bf16 or fp16 from the config's "dtype" (or a
//     bare dtype config; bf16 when none): bf16, bfloat16, torch.bfloat16,
//     fp16, float16, torch.float16, torch.half;
//   half -> pure_bf16 (a float16 dtype is refused: no pure fp16 here);
//   checkpoint -> checkpointing full (config, e.g. module classes, ignored);
//   module_replace -> attention sdpa;
//   fused_optimizer / fused_adamw -> optimizer fused_adamw;
//   offload / cpu_offload -> offload cpu;
//   sequence_parallel -> sequence_parallel true (config ignored);
//   parallel_mode with ([("data", 4), ("tensor", 2), ("pipeline", 2)], None)
//     (or the bare list of pairs; "pipe" = "pipeline") -> the degrees named;
//   tensor_parallel / pipeline_parallel with {"size": n} or a bare n.
// Errors are INVALID_ARGUMENT (PartialStrategyBuilder's, which name fields
// by their JSON keys, and the literal parser's), e.g.
//   "unknown method 'foo' (allowed: zero1, ...)"
//   "element 2: expected a method name or a (name, config) tuple, got 5"
//   "conflicting settings of sharding: 'zero1' sets zero1, 'zero2' sets zero2"
//   "expected ']' at offset 17"
absl::StatusOr<PartialStrategy> ParseAtorchStrategy(absl::string_view text);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_ATORCH_STRATEGY_H_
