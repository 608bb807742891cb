#include "spec/strategy.h"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "spec/strategy_fields.h"

namespace autoaccel {
namespace {

// Every enumerator of `table`, in order; built once (one table per enum).
template <typename Enum, size_t N>
const std::vector<Enum>& AllOf(const std::pair<Enum, absl::string_view> (&table)[N]) {
  static const auto* values = [&table] {
    auto* v = new std::vector<Enum>;
    for (const auto& entry : table) v->push_back(entry.first);
    return v;
  }();
  return *values;
}

absl::StatusOr<int> ParsePositive(absl::string_view key, absl::string_view value) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.", key, ": expected a positive integer, got '", value, "'"));
  }
  return v;
}

// Every kLayout and kLayoutIfSet field at its default.
bool IsSingleRank(const Strategy& s) {
  static const Strategy kDefault;
  return !AnyRow(kStrategyFields, [&](const auto& field) {
    return (field.text == TextRule::kLayout || field.text == TextRule::kLayoutIfSet) &&
           s.*field.member != kDefault.*field.member;
  });
}

// Whether the canonical text writes `field` of `s`.
template <typename T>
bool Written(const StrategyField<T>& field, const Strategy& s, bool single_rank) {
  static const Strategy kDefault;
  switch (field.text) {
    case TextRule::kAlways:
      return true;
    case TextRule::kLayout:
      return !single_rank;
    case TextRule::kLayoutIfSet:
    case TextRule::kIfSet:
      return s.*field.member != kDefault.*field.member;
    case TextRule::kIfPipelined:
      return s.pipeline_parallel > 1;
    case TextRule::kIfInterleaved:
      return s.pipeline_parallel > 1 && s.pipeline_schedule == PipelineSchedule::kInterleaved;
    case TextRule::kIfContextParallel:
      return s.context_parallel > 1;
  }
  return true;
}

}  // namespace

absl::string_view PrecisionName(Precision p) { return EnumName(kPrecisionNames, p, "?"); }
absl::string_view CheckpointingName(Checkpointing c) {
  return EnumName(kCheckpointingNames, c, "?");
}
absl::string_view AttentionName(Attention a) { return EnumName(kAttentionNames, a, "?"); }
absl::string_view OptimizerName(Optimizer o) { return EnumName(kOptimizerNames, o, "?"); }
absl::string_view OffloadName(Offload o) { return EnumName(kOffloadNames, o, "?"); }
absl::string_view ShardingName(Sharding s) { return EnumName(kShardingNames, s, "?"); }
absl::string_view PipelineScheduleName(PipelineSchedule p) {
  return EnumName(kPipelineScheduleNames, p, "?");
}
absl::StatusOr<Sharding> ParseSharding(absl::string_view name) {
  return ParseChoice<Sharding>(kShardingNames, "sharding", name);
}
absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view name) {
  return ParseChoice<PipelineSchedule>(kPipelineScheduleNames, "pipeline_schedule", name);
}
absl::string_view ContextParallelCommName(ContextParallelComm c) {
  return EnumName(kContextParallelCommNames, c, "?");
}
absl::StatusOr<ContextParallelComm> ParseContextParallelComm(absl::string_view name) {
  return ParseChoice<ContextParallelComm>(kContextParallelCommNames, "context_parallel_comm", name);
}
absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  return ParseChoice<Precision>(kPrecisionNames, "precision", name);
}
absl::StatusOr<Checkpointing> ParseCheckpointing(absl::string_view name) {
  return ParseChoice<Checkpointing>(kCheckpointingNames, "checkpointing", name);
}
absl::StatusOr<Attention> ParseAttention(absl::string_view name) {
  return ParseChoice<Attention>(kAttentionNames, "attention", name);
}
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name) {
  return ParseChoice<Optimizer>(kOptimizerNames, "optimizer", name);
}
absl::StatusOr<Offload> ParseOffload(absl::string_view name) {
  return ParseChoice<Offload>(kOffloadNames, "offload", name);
}

const std::vector<Precision>& AllPrecisions() { return AllOf(kPrecisionNames); }
const std::vector<Checkpointing>& AllCheckpointings() { return AllOf(kCheckpointingNames); }
const std::vector<Attention>& AllAttentions() { return AllOf(kAttentionNames); }
const std::vector<Optimizer>& AllOptimizers() { return AllOf(kOptimizerNames); }
const std::vector<Offload>& AllOffloads() { return AllOf(kOffloadNames); }
const std::vector<Sharding>& AllShardings() { return AllOf(kShardingNames); }
const std::vector<PipelineSchedule>& AllPipelineSchedules() {
  return AllOf(kPipelineScheduleNames);
}
const std::vector<ContextParallelComm>& AllContextParallelComms() {
  return AllOf(kContextParallelCommNames);
}

bool operator==(const Strategy& a, const Strategy& b) {
  return !AnyRow(kStrategyFields,
                 [&](const auto& field) { return a.*field.member != b.*field.member; });
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
  const auto key = [form](auto member) { return FieldKey(member, form); };
  const auto error = [](absl::string_view key, auto&&... why) {
    return absl::InvalidArgumentError(absl::StrCat("strategy.", key, ": ", why...));
  };
  for (int Strategy::*degree :
       {&Strategy::data_parallel, &Strategy::tensor_parallel, &Strategy::pipeline_parallel,
        &Strategy::virtual_stages, &Strategy::context_parallel, &Strategy::expert_parallel}) {
    if (s.*degree < 1) return error(key(degree), "must be >= 1, got ", s.*degree);
  }
  if (s.sharding != Sharding::kNone && s.weight_replicas() == 1) {
    return error(key(&Strategy::sharding), ShardingName(s.sharding),
                 " shards model state over the data- and context-parallel ranks and needs ",
                 key(&Strategy::data_parallel), " or ", key(&Strategy::context_parallel),
                 " > 1 (allowed with 1: none)");
  }
  if (s.context_parallel == 1 && s.context_parallel_comm != ContextParallelComm::kP2p) {
    return error(key(&Strategy::context_parallel_comm),
                 ContextParallelCommName(s.context_parallel_comm), " needs ",
                 key(&Strategy::context_parallel),
                 " > 1 (allowed without context parallelism: p2p)");
  }
  if (s.weight_replicas() % s.expert_parallel != 0) {
    return error(key(&Strategy::expert_parallel), s.expert_parallel,
                 " spreads the experts over data- and context-parallel ranks and must divide ",
                 key(&Strategy::data_parallel), " * ", key(&Strategy::context_parallel), " (",
                 s.weight_replicas(), ")");
  }
  if (s.sequence_parallel && s.tensor_parallel == 1) {
    return error(key(&Strategy::sequence_parallel),
                 "splits activations over tensor-parallel ranks and needs ",
                 key(&Strategy::tensor_parallel), " > 1");
  }
  if (s.pipeline_parallel == 1 && s.pipeline_schedule != PipelineSchedule::k1F1B) {
    return error(key(&Strategy::pipeline_schedule), PipelineScheduleName(s.pipeline_schedule),
                 " needs ", key(&Strategy::pipeline_parallel),
                 " > 1 (allowed without a pipeline: 1f1b)");
  }
  if (s.pipeline_schedule == PipelineSchedule::k1F1B && s.virtual_stages != 1) {
    return error(key(&Strategy::virtual_stages),
                 "1f1b runs one model chunk per rank (must be 1), got ", s.virtual_stages);
  }
  if (s.pipeline_schedule == PipelineSchedule::kInterleaved && s.virtual_stages < 2) {
    return error(key(&Strategy::virtual_stages),
                 "interleaved needs at least 2 model chunks per rank, got ", s.virtual_stages);
  }
  return absl::OkStatus();
}

bool KeepsBf16Weights(Precision p) { return p == Precision::kPureBf16 || p == Precision::kFp8; }

bool UsesBf16(Precision p) {
  return p == Precision::kBf16 || p == Precision::kPureBf16 || p == Precision::kFp8;
}

std::string StrategyToText(const Strategy& s) {
  const bool single_rank = IsSingleRank(s);
  std::vector<std::string> items;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    if (Written(field, s, single_rank)) {
      items.push_back(absl::StrCat(field.text_key, "=", FieldText(field, s.*field.member)));
    }
  });
  return absl::StrJoin(items, ",");
}

absl::StatusOr<Strategy> ParseStrategyText(absl::string_view text) {
  Strategy s;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    absl::Status status;
    const bool known = AnyRow(kStrategyFields, [&](const auto& field) {
      if (field.text_key != key) return false;
      using T = RowValue<decltype(field)>;
      if constexpr (std::is_same_v<T, int>) {
        absl::StatusOr<int> v = ParsePositive(key, value);
        if (v.ok()) s.*field.member = *v;
        status = v.status();
      } else if constexpr (std::is_same_v<T, bool>) {
        if (value == "0" || value == "1") {
          s.*field.member = value == "1";
        } else {
          status = absl::InvalidArgumentError(
              absl::StrCat("strategy.", key, ": expected 0 or 1, got '", value, "'"));
        }
      } else {
        absl::StatusOr<T> v = ParseChoice(field, key, value);
        if (v.ok()) s.*field.member = *v;
        status = v.status();
      }
      return true;
    });
    if (!known) {
      std::vector<absl::string_view> keys;
      ForEachRow(kStrategyFields, [&](const auto& field) { keys.push_back(field.text_key); });
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy: unknown key '", key, "' (allowed: ", absl::StrJoin(keys, ", "), ")"));
    }
    RETURN_IF_ERROR(status);
  }
  RETURN_IF_ERROR(CheckCheckpointPercent(s, "ckpt_pct"));
  RETURN_IF_ERROR(CheckLayout(s, StrategyForm::kText));
  return s;
}

nlohmann::json StrategyToJson(const Strategy& s) {
  nlohmann::json j = nlohmann::json::object();
  ForEachRow(kStrategyFields, [&](const auto& field) {
    using T = RowValue<decltype(field)>;
    if constexpr (std::is_enum_v<T>) {
      j[std::string(field.name)] = std::string(ChoiceName(field, s.*field.member));
    } else {
      j[std::string(field.name)] = s.*field.member;
    }
  });
  return j;
}

absl::StatusOr<Strategy> StrategyFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("strategy: expected a JSON object");
  Strategy s;
  for (const auto& [key, value] : j.items()) {
    absl::Status status;
    const bool known = AnyRow(kStrategyFields, [&, &key = key, &value = value](const auto& field) {
      if (field.name != key) return false;
      using T = RowValue<decltype(field)>;
      if constexpr (std::is_same_v<T, int>) {
        if (!value.is_number_integer() || value.get<int64_t>() <= 0 ||
            value.get<int64_t>() > std::numeric_limits<int>::max()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("strategy.", key, ": expected a positive integer"));
        } else {
          s.*field.member = value.get<int>();
        }
      } else if constexpr (std::is_same_v<T, bool>) {
        if (!value.is_boolean()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("strategy.", key, ": expected true or false"));
        } else {
          s.*field.member = value.get<bool>();
        }
      } else if (!value.is_string()) {
        status = absl::InvalidArgumentError(absl::StrCat("strategy.", key, ": expected a string"));
      } else {
        absl::StatusOr<T> v = ParseChoice(field, key, value.get<std::string>());
        if (v.ok()) s.*field.member = *v;
        status = v.status();
      }
      return true;
    });
    if (!known)
      return absl::InvalidArgumentError(absl::StrCat("strategy: unknown key '", key, "'"));
    RETURN_IF_ERROR(status);
  }
  RETURN_IF_ERROR(CheckCheckpointPercent(s));
  RETURN_IF_ERROR(CheckLayout(s));
  return s;
}

}  // namespace autoaccel
