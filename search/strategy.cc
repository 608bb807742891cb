#include "search/strategy.h"

#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/enum_names.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseEnum(absl::string_view what, absl::string_view name,
                               const EnumNameTable<Enum, N>& table) {
  if (std::optional<Enum> v = EnumFromName(table, name)) return *v;
  return absl::InvalidArgumentError(absl::StrCat("strategy.", what, ": unknown value '", name,
                                                 "' (allowed: ", EnumNameList(table), ")"));
}

constexpr std::pair<Precision, absl::string_view> kPrecisions[] = {
    {Precision::kFp32, "fp32"},
    {Precision::kBf16, "bf16"},
    {Precision::kFp16, "fp16"},
    {Precision::kPureBf16, "pure_bf16"}};
constexpr std::pair<Checkpointing, absl::string_view> kCheckpointings[] = {
    {Checkpointing::kNone, "none"},
    {Checkpointing::kSelective, "selective"},
    {Checkpointing::kFull, "full"}};
constexpr std::pair<Attention, absl::string_view> kAttentions[] = {{Attention::kMath, "math"},
                                                                   {Attention::kSdpa, "sdpa"}};
constexpr std::pair<Optimizer, absl::string_view> kOptimizers[] = {
    {Optimizer::kAdamW, "adamw"}, {Optimizer::kFusedAdamW, "fused_adamw"}};
constexpr std::pair<Offload, absl::string_view> kOffloads[] = {{Offload::kNone, "none"},
                                                               {Offload::kCpu, "cpu"}};
constexpr std::pair<Sharding, absl::string_view> kShardings[] = {{Sharding::kNone, "none"},
                                                                 {Sharding::kZero1, "zero1"},
                                                                 {Sharding::kZero2, "zero2"},
                                                                 {Sharding::kFsdp, "fsdp"}};
constexpr std::pair<PipelineSchedule, absl::string_view> kPipelineSchedules[] = {
    {PipelineSchedule::k1F1B, "1f1b"}, {PipelineSchedule::kInterleaved, "interleaved"}};

template <typename Enum, size_t N>
std::vector<Enum> Values(const std::pair<Enum, absl::string_view> (&table)[N]) {
  std::vector<Enum> out;
  for (const auto& entry : table) out.push_back(entry.first);
  return out;
}

absl::StatusOr<int> ParsePositive(absl::string_view key, absl::string_view value) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.", key, ": expected a positive integer, got '", value, "'"));
  }
  return v;
}

}  // namespace

absl::string_view PrecisionName(Precision p) { return EnumName(kPrecisions, p, "?"); }
absl::string_view CheckpointingName(Checkpointing c) { return EnumName(kCheckpointings, c, "?"); }
absl::string_view AttentionName(Attention a) { return EnumName(kAttentions, a, "?"); }
absl::string_view OptimizerName(Optimizer o) { return EnumName(kOptimizers, o, "?"); }
absl::string_view OffloadName(Offload o) { return EnumName(kOffloads, o, "?"); }
absl::string_view ShardingName(Sharding s) { return EnumName(kShardings, s, "?"); }
absl::string_view PipelineScheduleName(PipelineSchedule p) {
  return EnumName(kPipelineSchedules, p, "?");
}
absl::StatusOr<Sharding> ParseSharding(absl::string_view name) {
  return ParseEnum("sharding", name, kShardings);
}
absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view name) {
  return ParseEnum("pipeline_schedule", name, kPipelineSchedules);
}
absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  return ParseEnum("precision", name, kPrecisions);
}
absl::StatusOr<Checkpointing> ParseCheckpointing(absl::string_view name) {
  return ParseEnum("checkpointing", name, kCheckpointings);
}
absl::StatusOr<Attention> ParseAttention(absl::string_view name) {
  return ParseEnum("attention", name, kAttentions);
}
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name) {
  return ParseEnum("optimizer", name, kOptimizers);
}
absl::StatusOr<Offload> ParseOffload(absl::string_view name) {
  return ParseEnum("offload", name, kOffloads);
}

const std::vector<Precision>& AllPrecisions() {
  static const auto* v = new std::vector<Precision>(Values(kPrecisions));
  return *v;
}
const std::vector<Checkpointing>& AllCheckpointings() {
  static const auto* v = new std::vector<Checkpointing>(Values(kCheckpointings));
  return *v;
}
const std::vector<Attention>& AllAttentions() {
  static const auto* v = new std::vector<Attention>(Values(kAttentions));
  return *v;
}
const std::vector<Optimizer>& AllOptimizers() {
  static const auto* v = new std::vector<Optimizer>(Values(kOptimizers));
  return *v;
}
const std::vector<Offload>& AllOffloads() {
  static const auto* v = new std::vector<Offload>(Values(kOffloads));
  return *v;
}
const std::vector<Sharding>& AllShardings() {
  static const auto* v = new std::vector<Sharding>(Values(kShardings));
  return *v;
}
const std::vector<PipelineSchedule>& AllPipelineSchedules() {
  static const auto* v = new std::vector<PipelineSchedule>(Values(kPipelineSchedules));
  return *v;
}

absl::Status CheckCheckpointPercent(const Strategy& s, absl::string_view key) {
  if (s.checkpoint_percent < 1 || s.checkpoint_percent > 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy.", key, ": expected a percentage in 1..100, got ", s.checkpoint_percent));
  }
  if (s.checkpointing == Checkpointing::kNone && s.checkpoint_percent != 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.", key, ": ", s.checkpoint_percent,
                     "% of layers needs checkpoint=selective or full (with none it must be 100)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLayout(const Strategy& s, StrategyForm form) {
  const bool text = form == StrategyForm::kText;
  const auto error = [&](absl::string_view json_key, absl::string_view text_key, auto&&... why) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.", text ? text_key : json_key, ": ", why...));
  };
  const struct {
    absl::string_view json_key, text_key;
    int value;
  } degrees[] = {{"data_parallel", "dp", s.data_parallel},
                 {"tensor_parallel", "tp", s.tensor_parallel},
                 {"pipeline_parallel", "pp", s.pipeline_parallel},
                 {"virtual_stages", "vpp", s.virtual_stages}};
  for (const auto& d : degrees) {
    if (d.value < 1) return error(d.json_key, d.text_key, "must be >= 1, got ", d.value);
  }
  if (s.sharding != Sharding::kNone && s.data_parallel == 1) {
    return error("sharding", "sharding", ShardingName(s.sharding),
                 " shards model state over data-parallel ranks and needs ",
                 text ? "dp" : "data_parallel", " > 1 (allowed with 1: none)");
  }
  if (s.sequence_parallel && s.tensor_parallel == 1) {
    return error("sequence_parallel", "sp",
                 "splits activations over tensor-parallel ranks and needs ",
                 text ? "tp" : "tensor_parallel", " > 1");
  }
  if (s.pipeline_parallel == 1 && s.pipeline_schedule != PipelineSchedule::k1F1B) {
    return error("pipeline_schedule", "pp_schedule", PipelineScheduleName(s.pipeline_schedule),
                 " needs ", text ? "pp" : "pipeline_parallel",
                 " > 1 (allowed without a pipeline: 1f1b)");
  }
  if (s.pipeline_schedule == PipelineSchedule::k1F1B && s.virtual_stages != 1) {
    return error("virtual_stages", "vpp", "1f1b runs one model chunk per rank (must be 1), got ",
                 s.virtual_stages);
  }
  if (s.pipeline_schedule == PipelineSchedule::kInterleaved && s.virtual_stages < 2) {
    return error("virtual_stages", "vpp",
                 "interleaved needs at least 2 model chunks per rank, got ", s.virtual_stages);
  }
  return absl::OkStatus();
}

bool UsesBf16(Precision p) { return p == Precision::kBf16 || p == Precision::kPureBf16; }

std::string StrategyToText(const Strategy& s) {
  std::string out;
  const bool single_rank = s.data_parallel == 1 && s.tensor_parallel == 1 &&
                           s.pipeline_parallel == 1 && s.sharding == Sharding::kNone &&
                           !s.sequence_parallel;
  if (!single_rank) {
    absl::StrAppend(&out, "dp=", s.data_parallel, ",tp=", s.tensor_parallel,
                    ",pp=", s.pipeline_parallel, ",sharding=", ShardingName(s.sharding));
    if (s.sequence_parallel) absl::StrAppend(&out, ",sp=1");
    if (s.pipeline_parallel > 1) {
      absl::StrAppend(&out, ",pp_schedule=", PipelineScheduleName(s.pipeline_schedule));
      if (s.pipeline_schedule == PipelineSchedule::kInterleaved) {
        absl::StrAppend(&out, ",vpp=", s.virtual_stages);
      }
    }
    out += ",";
  }
  absl::StrAppend(&out, "mbs=", s.micro_batch_size, ",ga=", s.grad_accum_steps,
                  ",precision=", PrecisionName(s.precision),
                  ",checkpoint=", CheckpointingName(s.checkpointing));
  if (s.checkpoint_percent != 100) absl::StrAppend(&out, ",ckpt_pct=", s.checkpoint_percent);
  absl::StrAppend(&out, ",attention=", AttentionName(s.attention),
                  ",optimizer=", OptimizerName(s.optimizer), ",offload=", OffloadName(s.offload));
  return out;
}

absl::StatusOr<Strategy> ParseStrategyText(absl::string_view text) {
  Strategy s;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (key == "mbs") {
      ASSIGN_OR_RETURN(s.micro_batch_size, ParsePositive("mbs", value));
    } else if (key == "ga") {
      ASSIGN_OR_RETURN(s.grad_accum_steps, ParsePositive("ga", value));
    } else if (key == "precision") {
      ASSIGN_OR_RETURN(s.precision, ParsePrecision(value));
    } else if (key == "checkpoint") {
      ASSIGN_OR_RETURN(s.checkpointing, ParseCheckpointing(value));
    } else if (key == "ckpt_pct") {
      ASSIGN_OR_RETURN(s.checkpoint_percent, ParsePositive("ckpt_pct", value));
    } else if (key == "attention") {
      ASSIGN_OR_RETURN(s.attention, ParseAttention(value));
    } else if (key == "optimizer") {
      ASSIGN_OR_RETURN(s.optimizer, ParseOptimizer(value));
    } else if (key == "offload") {
      ASSIGN_OR_RETURN(s.offload, ParseOffload(value));
    } else if (key == "dp") {
      ASSIGN_OR_RETURN(s.data_parallel, ParsePositive("dp", value));
    } else if (key == "tp") {
      ASSIGN_OR_RETURN(s.tensor_parallel, ParsePositive("tp", value));
    } else if (key == "pp") {
      ASSIGN_OR_RETURN(s.pipeline_parallel, ParsePositive("pp", value));
    } else if (key == "vpp") {
      ASSIGN_OR_RETURN(s.virtual_stages, ParsePositive("vpp", value));
    } else if (key == "sharding") {
      ASSIGN_OR_RETURN(s.sharding, ParseSharding(value));
    } else if (key == "pp_schedule") {
      ASSIGN_OR_RETURN(s.pipeline_schedule, ParseEnum("pp_schedule", value, kPipelineSchedules));
    } else if (key == "sp") {
      if (value != "0" && value != "1") {
        return absl::InvalidArgumentError(
            absl::StrCat("strategy.sp: expected 0 or 1, got '", value, "'"));
      }
      s.sequence_parallel = value == "1";
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy: unknown key '", key,
                       "' (allowed: dp, tp, pp, sharding, sp, pp_schedule, vpp, mbs, ga, "
                       "precision, checkpoint, ckpt_pct, attention, optimizer, offload)"));
    }
  }
  RETURN_IF_ERROR(CheckCheckpointPercent(s, "ckpt_pct"));
  RETURN_IF_ERROR(CheckLayout(s, StrategyForm::kText));
  return s;
}

nlohmann::json StrategyToJson(const Strategy& s) {
  return nlohmann::json{
      {"data_parallel", s.data_parallel},
      {"tensor_parallel", s.tensor_parallel},
      {"pipeline_parallel", s.pipeline_parallel},
      {"sharding", std::string(ShardingName(s.sharding))},
      {"pipeline_schedule", std::string(PipelineScheduleName(s.pipeline_schedule))},
      {"virtual_stages", s.virtual_stages},
      {"sequence_parallel", s.sequence_parallel},
      {"micro_batch_size", s.micro_batch_size},
      {"grad_accum_steps", s.grad_accum_steps},
      {"precision", std::string(PrecisionName(s.precision))},
      {"checkpointing", std::string(CheckpointingName(s.checkpointing))},
      {"checkpoint_percent", s.checkpoint_percent},
      {"attention", std::string(AttentionName(s.attention))},
      {"optimizer", std::string(OptimizerName(s.optimizer))},
      {"offload", std::string(OffloadName(s.offload))}};
}

absl::StatusOr<Strategy> StrategyFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("strategy: expected a JSON object");
  Strategy s;
  for (const auto& [key, value] : j.items()) {
    if (key == "micro_batch_size" || key == "grad_accum_steps" || key == "checkpoint_percent" ||
        key == "data_parallel" || key == "tensor_parallel" || key == "pipeline_parallel" ||
        key == "virtual_stages") {
      if (!value.is_number_integer() || value.get<int64_t>() <= 0 ||
          value.get<int64_t>() > std::numeric_limits<int>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat("strategy.", key, ": expected a positive integer"));
      }
      const int v = value.get<int>();
      if (key == "micro_batch_size") {
        s.micro_batch_size = v;
      } else if (key == "grad_accum_steps") {
        s.grad_accum_steps = v;
      } else if (key == "checkpoint_percent") {
        s.checkpoint_percent = v;
      } else if (key == "data_parallel") {
        s.data_parallel = v;
      } else if (key == "tensor_parallel") {
        s.tensor_parallel = v;
      } else if (key == "pipeline_parallel") {
        s.pipeline_parallel = v;
      } else {
        s.virtual_stages = v;
      }
    } else if (key == "sequence_parallel") {
      if (!value.is_boolean()) {
        return absl::InvalidArgumentError("strategy.sequence_parallel: expected true or false");
      }
      s.sequence_parallel = value.get<bool>();
    } else if (key == "precision" || key == "checkpointing" || key == "attention" ||
               key == "optimizer" || key == "offload" || key == "sharding" ||
               key == "pipeline_schedule") {
      if (!value.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("strategy.", key, ": expected a string"));
      }
      const std::string v = value.get<std::string>();
      if (key == "precision") {
        ASSIGN_OR_RETURN(s.precision, ParsePrecision(v));
      } else if (key == "checkpointing") {
        ASSIGN_OR_RETURN(s.checkpointing, ParseCheckpointing(v));
      } else if (key == "attention") {
        ASSIGN_OR_RETURN(s.attention, ParseAttention(v));
      } else if (key == "optimizer") {
        ASSIGN_OR_RETURN(s.optimizer, ParseOptimizer(v));
      } else if (key == "offload") {
        ASSIGN_OR_RETURN(s.offload, ParseOffload(v));
      } else if (key == "sharding") {
        ASSIGN_OR_RETURN(s.sharding, ParseSharding(v));
      } else {
        ASSIGN_OR_RETURN(s.pipeline_schedule, ParsePipelineSchedule(v));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("strategy: unknown key '", key, "'"));
    }
  }
  RETURN_IF_ERROR(CheckCheckpointPercent(s));
  RETURN_IF_ERROR(CheckLayout(s));
  return s;
}

}  // namespace autoaccel
