// The strategy value type: one point of the search space.
//
// A strategy has exactly one canonical text form and one JSON form; both parse
// back to an equal value (see strategy_test). Field names in the JSON form are
// a stable, user-visible contract: add keys, never rename them.
#ifndef AUTOACCEL_SEARCH_STRATEGY_H_
#define AUTOACCEL_SEARCH_STRATEGY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

enum class Precision { kFp32, kBf16 };
enum class Checkpointing { kNone, kFull };
enum class Attention { kMath, kSdpa };

// User-facing names ("fp32", "bf16", "none", "full", "math", "sdpa").
absl::string_view PrecisionName(Precision p);
absl::string_view CheckpointingName(Checkpointing c);
absl::string_view AttentionName(Attention a);
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
absl::StatusOr<Checkpointing> ParseCheckpointing(absl::string_view name);
absl::StatusOr<Attention> ParseAttention(absl::string_view name);

struct Strategy {
  int micro_batch_size = 1;                // samples per forward/backward on one rank
  int grad_accum_steps = 1;                // micro-batches per optimizer step
  Precision precision = Precision::kFp32;  // bf16 = autocast, fp32 weights
  Checkpointing checkpointing = Checkpointing::kNone;
  Attention attention = Attention::kMath;

  friend bool operator==(const Strategy& a, const Strategy& b) {
    return a.micro_batch_size == b.micro_batch_size && a.grad_accum_steps == b.grad_accum_steps &&
           a.precision == b.precision && a.checkpointing == b.checkpointing &&
           a.attention == b.attention;
  }
  friend bool operator!=(const Strategy& a, const Strategy& b) { return !(a == b); }
};

// Canonical text, keys in a fixed order:
//   "mbs=4,ga=2,precision=bf16,checkpoint=full,attention=sdpa"
std::string StrategyToText(const Strategy& s);

// Parses the canonical text. Keys may come in any order; a missing key keeps
// its default. Unknown keys, bad values and non-positive sizes give
// INVALID_ARGUMENT naming the key.
absl::StatusOr<Strategy> ParseStrategyText(absl::string_view text);

// JSON form: {"micro_batch_size":4,"grad_accum_steps":2,"precision":"bf16",
//             "checkpointing":"full","attention":"sdpa"}
nlohmann::json StrategyToJson(const Strategy& s);

// Inverse of StrategyToJson; same error rules as ParseStrategyText.
absl::StatusOr<Strategy> StrategyFromJson(const nlohmann::json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_STRATEGY_H_
