#include "search/method_filter.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

struct Method {
  absl::string_view name;
  // The strategy field it reads; two methods of one dimension that no value
  // satisfies together "cannot both be used (one <dimension> per strategy)".
  absl::string_view dimension;
  bool (*uses)(const Strategy&);
};

constexpr Method kMethods[] = {
    {"zero1", "sharding", [](const Strategy& s) { return s.sharding == Sharding::kZero1; }},
    {"zero2", "sharding", [](const Strategy& s) { return s.sharding == Sharding::kZero2; }},
    {"fsdp", "sharding", [](const Strategy& s) { return s.sharding == Sharding::kFsdp; }},
    {"data_parallel", "data_parallel", [](const Strategy& s) { return s.data_parallel > 1; }},
    {"tensor_parallel", "tensor_parallel", [](const Strategy& s) { return s.tensor_parallel > 1; }},
    {"pipeline_parallel", "pipeline_parallel",
     [](const Strategy& s) { return s.pipeline_parallel > 1; }},
    {"sequence_parallel", "sequence_parallel",
     [](const Strategy& s) { return s.sequence_parallel; }},
    {"interleaved", "pipeline_schedule",
     [](const Strategy& s) { return s.pipeline_schedule == PipelineSchedule::kInterleaved; }},
    {"amp_native", "precision",
     [](const Strategy& s) {
       return s.precision == Precision::kBf16 || s.precision == Precision::kFp16;
     }},
    {"bf16", "precision", [](const Strategy& s) { return s.precision == Precision::kBf16; }},
    {"fp16", "precision", [](const Strategy& s) { return s.precision == Precision::kFp16; }},
    {"pure_bf16", "precision",
     [](const Strategy& s) { return s.precision == Precision::kPureBf16; }},
    {"fp32", "precision", [](const Strategy& s) { return s.precision == Precision::kFp32; }},
    {"fp8", "precision", [](const Strategy& s) { return s.precision == Precision::kFp8; }},
    {"checkpoint", "checkpointing",
     [](const Strategy& s) { return s.checkpointing != Checkpointing::kNone; }},
    {"selective_checkpoint", "checkpointing",
     [](const Strategy& s) { return s.checkpointing == Checkpointing::kSelective; }},
    {"full_checkpoint", "checkpointing",
     [](const Strategy& s) { return s.checkpointing == Checkpointing::kFull; }},
    {"sdpa", "attention", [](const Strategy& s) { return s.attention == Attention::kSdpa; }},
    {"fused_optimizer", "optimizer",
     [](const Strategy& s) { return s.optimizer == Optimizer::kFusedAdamW; }},
    {"offload", "offload", [](const Strategy& s) { return s.offload == Offload::kCpu; }},
};
constexpr int kNumMethods = sizeof(kMethods) / sizeof(kMethods[0]);
static_assert(kNumMethods <= 32, "usage patterns are 32-bit masks");

constexpr std::pair<absl::string_view, absl::string_view> kMethodAliases[] = {
    {"half", "pure_bf16"},
    {"module_replace", "sdpa"},
    {"fused_adamw", "fused_optimizer"},
    {"cpu_offload", "offload"}};

// Index into kMethods of a canonical name or alias (exact spelling), or -1.
int MethodIndex(absl::string_view name) {
  for (const auto& [alias, canonical] : kMethodAliases) {
    if (name == alias) name = canonical;
  }
  for (int i = 0; i < kNumMethods; ++i) {
    if (kMethods[i].name == name) return i;
  }
  return -1;
}

uint32_t UsageMask(const Strategy& s) {
  uint32_t mask = 0;
  for (int i = 0; i < kNumMethods; ++i) {
    if (kMethods[i].uses(s)) mask |= uint32_t{1} << i;
  }
  return mask;
}

// Every set of methods that some strategy of a valid layout uses together.
// Degrees of 1 and 2 cover every method's condition (each only asks "> 1").
const std::vector<uint32_t>& UsagePatterns() {
  static const auto* patterns = [] {
    std::set<uint32_t> masks;
    Strategy s;
    for (int dp : {1, 2}) {
      for (int tp : {1, 2}) {
        for (int pp : {1, 2}) {
          for (Sharding sharding : AllShardings()) {
            for (bool sp : {false, true}) {
              for (PipelineSchedule schedule : AllPipelineSchedules()) {
                s.data_parallel = dp;
                s.tensor_parallel = tp;
                s.pipeline_parallel = pp;
                s.sharding = sharding;
                s.sequence_parallel = sp;
                s.pipeline_schedule = schedule;
                s.virtual_stages = schedule == PipelineSchedule::kInterleaved ? 2 : 1;
                if (!CheckLayout(s).ok()) continue;
                for (Precision p : AllPrecisions()) {
                  for (Checkpointing c : AllCheckpointings()) {
                    for (Attention a : AllAttentions()) {
                      for (Optimizer o : AllOptimizers()) {
                        for (Offload off : AllOffloads()) {
                          s.precision = p;
                          s.checkpointing = c;
                          s.attention = a;
                          s.optimizer = o;
                          s.offload = off;
                          masks.insert(UsageMask(s));
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
    return new std::vector<uint32_t>(masks.begin(), masks.end());
  }();
  return *patterns;
}

std::string AllowedMethodsText() {
  return absl::StrCat("allowed: ", absl::StrJoin(KnownMethods(), ", "), "; aliases: ",
                      absl::StrJoin(kMethodAliases, ", ", [](std::string* out, const auto& alias) {
                        absl::StrAppend(out, alias.first, " = ", alias.second);
                      }));
}

// One flag's list: split, trimmed, lower-cased, canonical, each name once.
absl::StatusOr<std::vector<std::string>> ParseMethodList(absl::string_view flag,
                                                         const std::vector<std::string>& list) {
  std::vector<std::string> out;
  for (const std::string& element : list) {
    for (absl::string_view piece : absl::StrSplit(element, ',')) {
      const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(piece));
      if (name.empty()) continue;
      const int index = MethodIndex(name);
      if (index < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": unknown method '", name, "' (", AllowedMethodsText(), ")"));
      }
      const std::string canonical(kMethods[index].name);
      if (std::find(out.begin(), out.end(), canonical) == out.end()) out.push_back(canonical);
    }
  }
  return out;
}

}  // namespace

const std::vector<std::string>& KnownMethods() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const Method& m : kMethods) v->emplace_back(m.name);
    return v;
  }();
  return *names;
}

bool UsesMethod(const Strategy& s, absl::string_view name) {
  const int index = MethodIndex(name);
  return index >= 0 && kMethods[index].uses(s);
}

std::string MethodFilter::Refusal(const Strategy& s) const {
  for (const std::string& name : exclude) {
    if (UsesMethod(s, name)) return absl::StrCat("excluded method '", name, "' (--exclude)");
  }
  for (const std::string& name : include) {
    if (!UsesMethod(s, name)) return absl::StrCat("lacks included method '", name, "' (--include)");
  }
  return "";
}

absl::StatusOr<MethodFilter> ParseMethodFilter(const std::vector<std::string>& include,
                                               const std::vector<std::string>& exclude) {
  MethodFilter f;
  ASSIGN_OR_RETURN(f.include, ParseMethodList("include", include));
  ASSIGN_OR_RETURN(f.exclude, ParseMethodList("exclude", exclude));
  for (const std::string& name : f.include) {
    if (std::find(f.exclude.begin(), f.exclude.end(), name) != f.exclude.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("include, exclude: '", name, "' is both included and excluded"));
    }
  }

  // Satisfiability, against the sets of methods real strategies use together.
  const std::vector<uint32_t>& patterns = UsagePatterns();
  const auto bit = [](const std::string& name) { return uint32_t{1} << MethodIndex(name); };
  const auto some = [&](uint32_t all_of, uint32_t none_of) {
    for (uint32_t p : patterns) {
      if ((p & all_of) == all_of && (p & none_of) == 0) return true;
    }
    return false;
  };
  for (size_t i = 0; i < f.include.size(); ++i) {
    for (size_t j = i + 1; j < f.include.size(); ++j) {
      const std::string& a = f.include[i];
      const std::string& b = f.include[j];
      if (some(bit(a) | bit(b), 0)) continue;
      const absl::string_view dim_a = kMethods[MethodIndex(a)].dimension;
      const absl::string_view dim_b = kMethods[MethodIndex(b)].dimension;
      return absl::InvalidArgumentError(absl::StrCat(
          "include: '", a, "' and '", b, "' cannot both be used (",
          dim_a == dim_b ? absl::StrCat("one ", dim_a, " per strategy") : "no strategy uses both",
          ")"));
    }
  }
  for (const std::string& a : f.include) {
    for (const std::string& b : f.exclude) {
      if (!some(bit(a), bit(b))) {
        return absl::InvalidArgumentError(
            absl::StrCat("include, exclude: '", a, "' needs '", b, "', which is excluded"));
      }
    }
  }
  uint32_t all_of = 0, none_of = 0;
  for (const std::string& name : f.include) all_of |= bit(name);
  for (const std::string& name : f.exclude) none_of |= bit(name);
  if (!some(all_of, none_of)) {
    if (f.exclude.empty()) {
      return absl::InvalidArgumentError("include: no strategy uses every included method");
    }
    if (f.include.empty()) {
      return absl::InvalidArgumentError("exclude: every strategy uses one of the excluded methods");
    }
    return absl::InvalidArgumentError(
        "include, exclude: no strategy uses every included method and none of the excluded ones");
  }
  return f;
}

}  // namespace autoaccel
