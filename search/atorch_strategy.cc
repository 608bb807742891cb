#include "search/atorch_strategy.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "search/python_literal.h"
#include "spec/strategy.h"

namespace autoaccel {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kAtorchMethods =
    "zero1, zero2, fsdp, amp_native, half, checkpoint, module_replace, fused_optimizer, "
    "fused_adamw, offload, cpu_offload, sequence_parallel, parallel_mode, tensor_parallel, "
    "pipeline_parallel";

// "bf16" or "fp16" for a dtype config of amp_native / half.
absl::StatusOr<Precision> DtypeOf(absl::string_view method, const Json& config) {
  const Json* dtype = &config;
  if (config.is_object()) {
    if (!config.contains("dtype")) return Precision::kBf16;
    dtype = &config["dtype"];
  }
  if (dtype->is_null()) return Precision::kBf16;
  if (!dtype->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(method, ": expected a dtype or {\"dtype\": ...}, got ", config.dump()));
  }
  const std::string name = absl::AsciiStrToLower(dtype->get<std::string>());
  if (name == "bf16" || name == "bfloat16" || name == "torch.bfloat16") return Precision::kBf16;
  if (name == "fp16" || name == "float16" || name == "torch.float16" || name == "torch.half") {
    return Precision::kFp16;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(method, ": unknown dtype '", dtype->get<std::string>(),
                   "' (allowed: bf16, bfloat16, torch.bfloat16, fp16, float16, "
                   "torch.float16, torch.half)"));
}

absl::StatusOr<int64_t> SizeOf(absl::string_view what, const Json& v) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) ||
      v.get<int64_t>() < 1 || v.get<int64_t>() > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a positive integer size, got ", v.dump()));
  }
  return v.get<int64_t>();
}

absl::Status ApplyParallelMode(const Json& config, PartialStrategyBuilder& b) {
  constexpr absl::string_view kUsage =
      "parallel_mode: expected ([(\"data\", n), (\"tensor\", n), (\"pipeline\", n)], None)";
  if (!config.is_array())
    return absl::InvalidArgumentError(absl::StrCat(kUsage, ", got ", config.dump()));
  // Either (pairs, ranks) or the bare list of pairs.
  const bool wrapped =
      !config.empty() && config[0].is_array() && (config[0].empty() || config[0][0].is_array());
  const Json& pairs = wrapped ? config[0] : config;
  const std::string origin = "'parallel_mode'";
  for (const Json& pair : pairs) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kUsage, ", got ", pair.dump(), " in the list"));
    }
    const std::string group = absl::AsciiStrToLower(pair[0].get<std::string>());
    absl::string_view field;
    if (group == "data") {
      field = "data_parallel";
    } else if (group == "tensor") {
      field = "tensor_parallel";
    } else if (group == "pipeline" || group == "pipe") {
      field = "pipeline_parallel";
    } else {
      return absl::InvalidArgumentError(absl::StrCat("parallel_mode: unknown group '",
                                                     pair[0].get<std::string>(),
                                                     "' (allowed: data, tensor, pipeline, pipe)"));
    }
    ASSIGN_OR_RETURN(int64_t size, SizeOf(absl::StrCat("parallel_mode ", group), pair[1]));
    RETURN_IF_ERROR(b.SetCount(field, size, pair[1].dump(), origin));
  }
  return absl::OkStatus();
}

absl::Status ApplyAtorchMethod(absl::string_view name, const Json& config,
                               PartialStrategyBuilder& b) {
  const std::string origin = absl::StrCat("'", name, "'");
  if (name == "zero1" || name == "zero2" || name == "fsdp") {
    return b.SetChoice("sharding", name, origin);
  }
  if (name == "amp_native") {
    ASSIGN_OR_RETURN(Precision p, DtypeOf(name, config));
    return b.SetChoice("precision", PrecisionName(p), origin);
  }
  if (name == "half") {
    ASSIGN_OR_RETURN(Precision p, DtypeOf(name, config));
    if (p == Precision::kFp16) {
      return absl::InvalidArgumentError(
          "half with float16 is not supported (pure fp16 training); use amp_native with fp16");
    }
    return b.SetChoice("precision", PrecisionName(Precision::kPureBf16), origin);
  }
  if (name == "checkpoint") return b.SetChoice("checkpointing", "full", origin);
  if (name == "module_replace") return b.SetChoice("attention", "sdpa", origin);
  if (name == "fused_optimizer" || name == "fused_adamw") {
    return b.SetChoice("optimizer", "fused_adamw", origin);
  }
  if (name == "offload" || name == "cpu_offload") return b.SetChoice("offload", "cpu", origin);
  if (name == "sequence_parallel") return b.SetFlag("sequence_parallel", true, origin);
  if (name == "parallel_mode") return ApplyParallelMode(config, b);
  if (name == "tensor_parallel" || name == "pipeline_parallel") {
    const Json* size = &config;
    if (config.is_object() && config.contains("size")) size = &config["size"];
    if (size->is_null() || size->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " needs a size: (\"", name,
                                                     "\", 2) or (\"", name, "\", {\"size\": 2})"));
    }
    ASSIGN_OR_RETURN(int64_t n, SizeOf(name, *size));
    return b.SetCount(name, n, size->dump(), origin);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown method '", name, "' (allowed: ", kAtorchMethods, ")"));
}

}  // namespace

absl::StatusOr<PartialStrategy> ParseAtorchStrategy(absl::string_view text) {
  ASSIGN_OR_RETURN(const Json list, ParsePythonLiteral(text));
  if (!list.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a list of methods, got ", list.dump()));
  }
  PartialStrategyBuilder b(StrategyForm::kJson);
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& element = list[i];
    const Json* name = &element;
    Json config;  // null: no config
    if (element.is_array() && !element.empty() && element.size() <= 3) {
      name = &element[0];
      if (element.size() >= 2) config = element[1];
      // ATorch's third item says whether the method is tunable; nothing to take from it.
      if (element.size() == 3 && !element[2].is_boolean()) name = &element;
    }
    if (!name->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("element ", i + 1,
                       ": expected a method name or a (name, config) tuple, got ", element.dump()));
    }
    const std::string method =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(name->get<std::string>()));
    RETURN_IF_ERROR(ApplyAtorchMethod(method, config, b));
  }
  return b.Finish();
}

}  // namespace autoaccel
