#include "search/strategy.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseEnum(absl::string_view what, absl::string_view name,
                               const std::pair<Enum, absl::string_view> (&table)[N]) {
  std::vector<std::string> allowed;
  for (const auto& [value, text] : table) {
    if (text == name) return value;
    allowed.emplace_back(text);
  }
  return absl::InvalidArgumentError(absl::StrCat("strategy.", what, ": unknown value '", name,
                                                 "' (allowed: ", absl::StrJoin(allowed, ", "),
                                                 ")"));
}

template <typename Enum, size_t N>
absl::string_view EnumName(Enum v, const std::pair<Enum, absl::string_view> (&table)[N]) {
  for (const auto& [value, text] : table) {
    if (value == v) return text;
  }
  return "?";
}

constexpr std::pair<Precision, absl::string_view> kPrecisions[] = {{Precision::kFp32, "fp32"},
                                                                   {Precision::kBf16, "bf16"}};
constexpr std::pair<Checkpointing, absl::string_view> kCheckpointings[] = {
    {Checkpointing::kNone, "none"}, {Checkpointing::kFull, "full"}};
constexpr std::pair<Attention, absl::string_view> kAttentions[] = {{Attention::kMath, "math"},
                                                                   {Attention::kSdpa, "sdpa"}};

absl::StatusOr<int> ParsePositive(absl::string_view key, absl::string_view value) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.", key, ": expected a positive integer, got '", value, "'"));
  }
  return v;
}

}  // namespace

absl::string_view PrecisionName(Precision p) { return EnumName(p, kPrecisions); }
absl::string_view CheckpointingName(Checkpointing c) { return EnumName(c, kCheckpointings); }
absl::string_view AttentionName(Attention a) { return EnumName(a, kAttentions); }
absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  return ParseEnum("precision", name, kPrecisions);
}
absl::StatusOr<Checkpointing> ParseCheckpointing(absl::string_view name) {
  return ParseEnum("checkpointing", name, kCheckpointings);
}
absl::StatusOr<Attention> ParseAttention(absl::string_view name) {
  return ParseEnum("attention", name, kAttentions);
}

std::string StrategyToText(const Strategy& s) {
  return absl::StrCat("mbs=", s.micro_batch_size, ",ga=", s.grad_accum_steps,
                      ",precision=", PrecisionName(s.precision),
                      ",checkpoint=", CheckpointingName(s.checkpointing),
                      ",attention=", AttentionName(s.attention));
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
    } else if (key == "attention") {
      ASSIGN_OR_RETURN(s.attention, ParseAttention(value));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy: unknown key '", key,
                       "' (allowed: mbs, ga, precision, checkpoint, attention)"));
    }
  }
  return s;
}

nlohmann::json StrategyToJson(const Strategy& s) {
  return nlohmann::json{{"micro_batch_size", s.micro_batch_size},
                        {"grad_accum_steps", s.grad_accum_steps},
                        {"precision", std::string(PrecisionName(s.precision))},
                        {"checkpointing", std::string(CheckpointingName(s.checkpointing))},
                        {"attention", std::string(AttentionName(s.attention))}};
}

absl::StatusOr<Strategy> StrategyFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("strategy: expected a JSON object");
  Strategy s;
  for (const auto& [key, value] : j.items()) {
    if (key == "micro_batch_size" || key == "grad_accum_steps") {
      if (!value.is_number_integer() || value.get<int64_t>() <= 0 ||
          value.get<int64_t>() > std::numeric_limits<int>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat("strategy.", key, ": expected a positive integer"));
      }
      (key == "micro_batch_size" ? s.micro_batch_size : s.grad_accum_steps) = value.get<int>();
    } else if (key == "precision" || key == "checkpointing" || key == "attention") {
      if (!value.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("strategy.", key, ": expected a string"));
      }
      const std::string v = value.get<std::string>();
      if (key == "precision") {
        ASSIGN_OR_RETURN(s.precision, ParsePrecision(v));
      } else if (key == "checkpointing") {
        ASSIGN_OR_RETURN(s.checkpointing, ParseCheckpointing(v));
      } else {
        ASSIGN_OR_RETURN(s.attention, ParseAttention(v));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("strategy: unknown key '", key, "'"));
    }
  }
  return s;
}

}  // namespace autoaccel
