#include "spec/partial_strategy.h"

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "spec/strategy_fields.h"

namespace autoaccel {
namespace {

// How a conflict message shows a value: as the canonical text does, but a
// flag as true or false.
template <typename T>
std::string Shown(const StrategyField<T>& field, T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else {
    return FieldText(field, value);
  }
}

// Calls f(field) with the row named `name`; false when there is none.
template <typename F>
bool WithField(absl::string_view name, F&& f) {
  return AnyRow(kStrategyFields, [&](const auto& field) {
    if (field.name != name) return false;
    f(field);
    return true;
  });
}

absl::Status NoSuchField(absl::string_view kind, absl::string_view name) {
  return absl::InternalError(absl::StrCat("partial strategy: no ", kind, " field '", name, "'"));
}

// Sets `field` of `p` to `value` unless something set it to another value
// before; `origins` says what set each field first.
template <typename T>
absl::Status SetOnce(const StrategyField<T>& field, T value, StrategyForm form,
                     absl::string_view origin, PartialStrategy& p,
                     std::map<std::string, std::string, std::less<>>& origins) {
  std::optional<T>& slot = p.*field.partial;
  std::string& first = origins[std::string(field.name)];
  if (slot.has_value() && *slot != value) {
    return absl::InvalidArgumentError(
        absl::StrCat("conflicting settings of ", FieldKey(field, form), ": ", first, " sets ",
                     Shown(field, *slot), ", ", origin, " sets ", Shown(field, value)));
  }
  if (!slot.has_value()) first = std::string(origin);
  slot = value;
  return absl::OkStatus();
}

}  // namespace

int PartialStrategy::CountSet() const {
  int n = 0;
  ForEachRow(kStrategyFields, [&](const auto& field) { n += (this->*field.partial).has_value(); });
  return n;
}

bool PartialStrategy::Matches(const Strategy& s) const {
  return !AnyRow(kStrategyFields, [&](const auto& field) {
    const auto& slot = this->*field.partial;
    return slot.has_value() && *slot != s.*field.member;
  });
}

std::string PartialStrategy::ToText() const {
  std::vector<std::string> items;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    const auto& slot = this->*field.partial;
    if (slot.has_value())
      items.push_back(absl::StrCat(field.text_key, "=", FieldText(field, *slot)));
  });
  return absl::StrJoin(items, ",");
}

bool operator==(const PartialStrategy& a, const PartialStrategy& b) {
  return !AnyRow(kStrategyFields,
                 [&](const auto& field) { return a.*field.partial != b.*field.partial; });
}

absl::Status PartialStrategyBuilder::SetCount(absl::string_view name, int64_t value,
                                              absl::string_view shown, absl::string_view origin) {
  absl::Status status = NoSuchField("count", name);
  WithField(name, [&](const auto& field) {
    if constexpr (std::is_same_v<RowValue<decltype(field)>, int>) {
      const int max = field.percent ? 100 : std::numeric_limits<int>::max();
      if (value < 1 || value > max) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "strategy.", FieldKey(field, form_), ": expected ",
            field.percent ? "a percentage in 1..100" : "a positive integer", ", got ", shown));
        return;
      }
      status = SetOnce(field, static_cast<int>(value), form_, origin, p_, origins_);
    }
  });
  return status;
}

absl::Status PartialStrategyBuilder::SetFlag(absl::string_view name, bool value,
                                             absl::string_view origin) {
  absl::Status status = NoSuchField("flag", name);
  WithField(name, [&](const auto& field) {
    if constexpr (std::is_same_v<RowValue<decltype(field)>, bool>) {
      status = SetOnce(field, value, form_, origin, p_, origins_);
    }
  });
  return status;
}

absl::Status PartialStrategyBuilder::SetChoice(absl::string_view name, absl::string_view value,
                                               absl::string_view origin) {
  absl::Status status = NoSuchField("enumeration", name);
  WithField(name, [&](const auto& field) {
    if constexpr (std::is_enum_v<RowValue<decltype(field)>>) {
      absl::StatusOr<RowValue<decltype(field)>> v =
          ParseChoice(field, FieldKey(field, form_), value);
      status = v.ok() ? SetOnce(field, *v, form_, origin, p_, origins_) : v.status();
    }
  });
  return status;
}

absl::StatusOr<PartialStrategy> PartialStrategyBuilder::Finish() const {
  const PartialStrategy& p = p_;
  Strategy s;
  s.sharding = p.sharding.value_or(Sharding::kNone);
  s.expert_parallel = p.expert_parallel.value_or(1);
  // Enough data-parallel ranks for the sharding and the experts asked for.
  s.data_parallel =
      p.data_parallel.value_or(std::max(s.sharding == Sharding::kNone ? 1 : 2, s.expert_parallel));
  s.sequence_parallel = p.sequence_parallel.value_or(false);
  s.context_parallel_comm = p.context_parallel_comm.value_or(ContextParallelComm::kP2p);
  s.context_parallel =
      p.context_parallel.value_or(s.context_parallel_comm == ContextParallelComm::kP2p ? 1 : 2);
  s.tensor_parallel = p.tensor_parallel.value_or(s.sequence_parallel ? 2 : 1);
  s.pipeline_schedule = p.pipeline_schedule.value_or(
      p.virtual_stages.value_or(1) > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B);
  const bool interleaved = s.pipeline_schedule == PipelineSchedule::kInterleaved;
  s.pipeline_parallel = p.pipeline_parallel.value_or(interleaved ? 2 : 1);
  s.virtual_stages = p.virtual_stages.value_or(interleaved ? 2 : 1);
  s.checkpoint_percent = p.checkpoint_percent.value_or(100);
  s.checkpointing = p.checkpointing.value_or(s.checkpoint_percent == 100 ? Checkpointing::kNone
                                                                         : Checkpointing::kFull);
  RETURN_IF_ERROR(CheckLayout(s, form_));
  RETURN_IF_ERROR(CheckCheckpointPercent(s, FieldKey(&Strategy::checkpoint_percent, form_)));
  return p;
}

}  // namespace autoaccel
