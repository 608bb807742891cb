// --load-strategy: the partial strategy a tuning run starts from (ATorch's
// load_strategy), in any of its three forms. Pure; any thread.
#ifndef AUTOACCEL_SEARCH_LOAD_STRATEGY_H_
#define AUTOACCEL_SEARCH_LOAD_STRATEGY_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spec/partial_strategy.h"

namespace autoaccel {

// Parses --load-strategy. The form is told by the first non-blank character:
//   '[' or '(': ATorch's list, a Python literal (ParseAtorchStrategy,
//       search/atorch_strategy.h, says which methods set which fields):
//         ["zero2", ("amp_native", {"dtype": torch.bfloat16}), "checkpoint"]
//   '{': a JSON object with some of the strategy's JSON keys
//       ({"sharding": "zero1", "micro_batch_size": 4}).
//   otherwise: canonical text with some keys ("dp=2,sharding=zero1"); the
//       keys of ParseStrategyText.
// Values are checked like the strategy parsers check them (positive sizes,
// a percent in 1..100, known names), and the set fields together must allow
// a valid layout (CheckLayout, CheckCheckpointPercent). A field set twice to
// different values is an error; to the same value, not.
// Returns INVALID_ARGUMENT starting "load_strategy: ", e.g.
//   "load_strategy: expected ']' at offset 17"
//   "load_strategy: unknown method 'foo' (allowed: ...)"
//   "load_strategy: conflicting settings of sharding: 'zero1' sets zero1, 'zero2' sets zero2"
//   "load_strategy: strategy.dp: expected a positive integer, got '0'"
//   "load_strategy: invalid JSON at offset 12: ..."
// Offsets are 0-based bytes into `text`. Blank text is an error.
absl::StatusOr<PartialStrategy> ParseLoadStrategy(absl::string_view text);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_LOAD_STRATEGY_H_
