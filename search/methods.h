// ATorch-compatible constraints on the strategies a tuning run tries: the
// `--include` / `--exclude` lists of optimization methods (ATorch's
// auto_accelerate `included` / `excluded`) and the partial strategy of
// `--load-strategy` (ATorch's `load_strategy`, or our own key=value / JSON
// forms with only some keys). Pure functions of their inputs; no I/O. Every
// function here may be called from any thread.
#ifndef AUTOACCEL_SEARCH_METHODS_H_
#define AUTOACCEL_SEARCH_METHODS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "search/strategy.h"

namespace autoaccel {

// ------------------------------------------------------------ methods

// The canonical method names, in this order, and what "a strategy uses the
// method" means:
//   "zero1", "zero2", "fsdp"  sharding equals it (so data_parallel > 1)
//   "data_parallel"           data_parallel > 1
//   "tensor_parallel"         tensor_parallel > 1
//   "pipeline_parallel"       pipeline_parallel > 1
//   "sequence_parallel"       sequence_parallel (Megatron SP over the tp ranks)
//   "interleaved"             pipeline_schedule interleaved
//   "amp_native"              precision bf16 or fp16 (autocast over fp32 weights)
//   "bf16", "fp16", "pure_bf16", "fp32"   that precision
//   "checkpoint"              checkpointing selective or full
//   "selective_checkpoint"    checkpointing selective
//   "full_checkpoint"         checkpointing full
//   "sdpa"                    attention sdpa
//   "fused_optimizer"         optimizer fused_adamw
//   "offload"                 offload cpu
// Aliases, read as the canonical name they stand for:
//   "half" = "pure_bf16": ATorch's half casts the model to half precision;
//            ours keeps fp32 masters beside the bf16 weights, and has no
//            pure fp16.
//   "module_replace" = "sdpa": ATorch swaps in fused attention kernels.
//   "fused_adamw" = "fused_optimizer", "cpu_offload" = "offload".
const std::vector<std::string>& KnownMethods();

// Whether `s` uses the method `name`: a canonical name or an alias, exact
// (lower-case) spelling. Any other name is used by no strategy (false).
bool UsesMethod(const Strategy& s, absl::string_view name);

// The --include / --exclude constraints. A tried strategy uses every
// included method and no excluded one.
struct MethodFilter {
  // Canonical names, each once, in the order first given.
  std::vector<std::string> include;
  std::vector<std::string> exclude;

  bool Allows(const Strategy& s) const { return Refusal(s).empty(); }
  // Why `s` is not allowed, or "" when it is. The first excluded method it
  // uses, else the first included one it lacks:
  //   "excluded method 'zero1' (--exclude)"
  //   "lacks included method 'checkpoint' (--include)"
  std::string Refusal(const Strategy& s) const;
  bool empty() const { return include.empty() && exclude.empty(); }
};

// Builds the filter from the flags' values. Each element may itself be a
// comma-separated list ("zero1,fsdp"); names are case-insensitive, trimmed,
// and aliases map to canonical names; empty names are skipped. Returns
// INVALID_ARGUMENT for lists that no strategy can satisfy:
//   "include: unknown method 'x' (allowed: ...; aliases: ...)" (or "exclude: ...")
//   "include, exclude: 'x' is both included and excluded"
//   "include: 'zero1' and 'fsdp' cannot both be used (one sharding per strategy)"
//   "include, exclude: 'zero1' needs 'data_parallel', which is excluded"
//   "exclude: every strategy uses one of the excluded methods" (e.g. all precisions)
// Satisfiable means by some strategy of a valid layout (CheckLayout); the
// world size and the model's rules are the search space's business.
absl::StatusOr<MethodFilter> ParseMethodFilter(const std::vector<std::string>& include,
                                               const std::vector<std::string>& exclude);

// ------------------------------------------------------------ partial strategy

// Some of a strategy's fields; an unset field matches any value.
struct PartialStrategy {
  std::optional<int> data_parallel, tensor_parallel, pipeline_parallel, virtual_stages,
      micro_batch_size, grad_accum_steps, checkpoint_percent;
  std::optional<Sharding> sharding;
  std::optional<PipelineSchedule> pipeline_schedule;
  std::optional<bool> sequence_parallel;
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

// Parses --load-strategy. The form is told by the first non-blank character:
//   '[' or '(': ATorch's list, a Python literal whose elements are a method
//       name or a (name, config[, tunable]) tuple:
//         ["zero2", ("amp_native", {"dtype": torch.bfloat16}), "checkpoint"]
//       zero1 / zero2 / fsdp -> sharding (config ignored);
//       amp_native -> precision bf16 or fp16 from the config's "dtype" (or a
//         bare dtype config; bf16 when none): bf16, bfloat16, torch.bfloat16,
//         fp16, float16, torch.float16, torch.half;
//       half -> pure_bf16 (a float16 dtype is refused: no pure fp16 here);
//       checkpoint -> checkpointing full (config, e.g. module classes, ignored);
//       module_replace -> attention sdpa;
//       fused_optimizer / fused_adamw -> optimizer fused_adamw;
//       offload / cpu_offload -> offload cpu;
//       sequence_parallel -> sequence_parallel true (config ignored);
//       parallel_mode with ([("data", 4), ("tensor", 2), ("pipeline", 2)], None)
//         (or the bare list of pairs; "pipe" = "pipeline") -> the degrees named;
//       tensor_parallel / pipeline_parallel with {"size": n} or a bare n.
//     Python literals: lists, tuples, sets (read as lists), dicts, strings
//     in either quote with escapes, ints, floats, True / False / None, bare
//     dotted names (torch.bfloat16 reads as the string "torch.bfloat16") and
//     # comments. Method names are case-insensitive.
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
// Offsets are 0-based bytes into `text`. Blank text is an error.
absl::StatusOr<PartialStrategy> ParseLoadStrategy(absl::string_view text);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_METHODS_H_
