// The ATorch-compatible method filter: the `--include` / `--exclude` lists of
// optimization methods (ATorch's auto_accelerate `included` / `excluded`)
// that every strategy a tuning run tries must satisfy. A method is a
// property of a strategy ("zero2", "checkpoint", "amp_native"), one row of
// the kMethods table (method_filter.cc). Pure functions of their inputs; no
// I/O. Every function here may be called from any thread.
#ifndef AUTOACCEL_SEARCH_METHOD_FILTER_H_
#define AUTOACCEL_SEARCH_METHOD_FILTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spec/strategy.h"

namespace autoaccel {

// The canonical method names, in this order, and what "a strategy uses the
// method" means:
//   "zero1", "zero2", "fsdp"  sharding equals it (so data_parallel > 1)
//   "data_parallel"           data_parallel > 1
//   "tensor_parallel"         tensor_parallel > 1
//   "pipeline_parallel"       pipeline_parallel > 1
//   "sequence_parallel"       sequence_parallel (Megatron SP over the tp ranks)
//   "interleaved"             pipeline_schedule interleaved
//   "amp_native"              precision bf16 or fp16 (autocast over fp32 weights)
//   "bf16", "fp16", "pure_bf16", "fp32", "fp8"   that precision
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

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_METHOD_FILTER_H_
