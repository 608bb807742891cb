#include "proto/convert.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "spec/model_overrides.h"
#include "spec/strategy_fields.h"
#include "spec/trial_metrics_fields.h"

namespace autoaccel {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The field of `m` that a table row names. A row without its field is a
// programming error that proto_convert_test catches; it aborts here.
const FieldDescriptor* WireField(const Message& m, absl::string_view name) {
  const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(std::string(name));
  if (f == nullptr) {
    std::fprintf(stderr, "%s has no field '%.*s'\n", m.GetDescriptor()->full_name().c_str(),
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return f;
}

// Field `f` of `m`, by the C++ type of the member it comes from or goes to:
// int is int32, int64_t int64, std::vector<int64_t> repeated int64.
void SetWire(Message& m, const FieldDescriptor* f, int v) { m.GetReflection()->SetInt32(&m, f, v); }
void SetWire(Message& m, const FieldDescriptor* f, int64_t v) {
  m.GetReflection()->SetInt64(&m, f, v);
}
void SetWire(Message& m, const FieldDescriptor* f, double v) {
  m.GetReflection()->SetDouble(&m, f, v);
}
void SetWire(Message& m, const FieldDescriptor* f, bool v) { m.GetReflection()->SetBool(&m, f, v); }
void SetWire(Message& m, const FieldDescriptor* f, std::string v) {
  m.GetReflection()->SetString(&m, f, std::move(v));
}
void SetWire(Message& m, const FieldDescriptor* f, const std::vector<int64_t>& v) {
  for (int64_t x : v) m.GetReflection()->AddInt64(&m, f, x);
}

template <typename T>
T GetWire(const Message& m, const FieldDescriptor* f) {
  const google::protobuf::Reflection* r = m.GetReflection();
  if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    T out;
    for (int i = 0; i < r->FieldSize(m, f); ++i) out.push_back(r->GetRepeatedInt64(m, f, i));
    return out;
  } else if constexpr (std::is_same_v<T, double>) {
    return r->GetDouble(m, f);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return r->GetInt64(m, f);
  } else if constexpr (std::is_same_v<T, bool>) {
    return r->GetBool(m, f);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return r->GetString(m, f);
  } else {
    static_assert(std::is_same_v<T, int>);
    return r->GetInt32(m, f);
  }
}

}  // namespace

v1::Strategy ToProto(const Strategy& s) {
  v1::Strategy p;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    const auto value = s.*field.member;
    if constexpr (std::is_enum_v<RowValue<decltype(field)>>) {
      SetWire(p, WireField(p, field.name), std::string(ChoiceName(field, value)));
    } else {
      SetWire(p, WireField(p, field.name), value);
    }
  });
  p.set_text(StrategyToText(s));
  return p;
}

absl::StatusOr<std::optional<ModelSpec>> ModelOfSpec(const v1::ModelSpec& m) {
  if (m.family() == "torchscript" || m.config_json().empty()) return std::nullopt;
  ASSIGN_OR_RETURN(nlohmann::json config, ParseUntrustedJson(m.config_json(), "model_config"));
  ASSIGN_OR_RETURN(
      ModelSpec spec,
      ModelSpecWithOverrides(
          m.family(), std::move(config),
          std::vector<std::string>(m.overrides().begin(), m.overrides().end()),
          std::vector<std::string>(m.new_overrides().begin(), m.new_overrides().end())));
  return std::optional<ModelSpec>(std::move(spec));
}

absl::StatusOr<Strategy> FromProto(const v1::Strategy& p) {
  Strategy s;
  absl::Status status;
  // Unset (0, "") means the field's default where the row says so, so that
  // messages written before a field existed still convert.
  AnyRow(kStrategyFields, [&](const auto& field) {
    using T = RowValue<decltype(field)>;
    const FieldDescriptor* f = WireField(p, field.name);
    const bool unset_is_default = field.proto_unset == ProtoUnset::kDefault;
    if constexpr (std::is_same_v<T, bool>) {
      s.*field.member = GetWire<bool>(p, f);
    } else if constexpr (std::is_enum_v<T>) {
      const std::string name = GetWire<std::string>(p, f);
      if (name.empty() && unset_is_default) return false;
      absl::StatusOr<T> v = ParseChoice(field, field.name, name);
      if (!v.ok()) {
        status = v.status();
        return true;
      }
      s.*field.member = *v;
    } else {
      const int v = GetWire<int>(p, f);
      if (v == 0 && unset_is_default) return false;
      // Other values out of range are CheckLayout's and CheckCheckpointPercent's.
      if (v <= 0 && !unset_is_default) {
        status = absl::InvalidArgumentError(
            absl::StrCat("strategy.", field.name, ": expected a positive integer, got ", v));
        return true;
      }
      s.*field.member = v;
    }
    return false;
  });
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(CheckCheckpointPercent(s));
  RETURN_IF_ERROR(CheckLayout(s));
  return s;
}

namespace {

// Each status and its wire value.
constexpr std::pair<TrialStatus, v1::TrialStatus> kTrialStatusWire[] = {
    {TrialStatus::kPending, v1::TRIAL_STATUS_PENDING},
    {TrialStatus::kRunning, v1::TRIAL_STATUS_RUNNING},
    {TrialStatus::kSucceeded, v1::TRIAL_STATUS_SUCCEEDED},
    {TrialStatus::kOom, v1::TRIAL_STATUS_OOM},
    {TrialStatus::kFailed, v1::TRIAL_STATUS_FAILED},
    {TrialStatus::kTimeout, v1::TRIAL_STATUS_TIMEOUT},
    {TrialStatus::kPruned, v1::TRIAL_STATUS_PRUNED},
    {TrialStatus::kCancelled, v1::TRIAL_STATUS_CANCELLED},
};

}  // namespace

v1::TrialStatus ToProto(TrialStatus s) {
  for (const auto& [status, wire] : kTrialStatusWire) {
    if (status == s) return wire;
  }
  return v1::TRIAL_STATUS_UNSPECIFIED;
}

absl::StatusOr<TrialStatus> FromProto(v1::TrialStatus s) {
  for (const auto& [status, wire] : kTrialStatusWire) {
    if (wire == s) return status;
  }
  return absl::InvalidArgumentError(absl::StrCat("status: unknown trial status ", s));
}

std::optional<TrialStatus> TrialStatusOf(const v1::Trial& t) {
  absl::StatusOr<TrialStatus> status = ParseTrialStatus(t.status());
  if (!status.ok()) return std::nullopt;
  return *status;
}

v1::TrialMetrics ToProto(const TrialMetrics& m) {
  v1::TrialMetrics p;
  ForEachRow(kTrialMetricsFields,
             [&](const auto& field) { SetWire(p, WireField(p, field.name), m.*field.member); });
  p.set_noisy(m.IsNoisy());
  return p;
}

TrialMetrics FromProto(const v1::TrialMetrics& p) {
  TrialMetrics m;
  ForEachRow(kTrialMetricsFields, [&](const auto& field) {
    m.*field.member = GetWire<RowValue<decltype(field)>>(p, WireField(p, field.name));
  });
  return m;
}

// By reflection on kPeakTflopsFields' names (proto_convert_test checks that
// every row has a double field of that name, and every field a row).
v1::PeakTflops ToProto(const PeakTflops& peak) {
  v1::PeakTflops p;
  const google::protobuf::Descriptor* d = p.GetDescriptor();
  for (const PeakTflopsField& f : kPeakTflopsFields) {
    p.GetReflection()->SetDouble(&p, d->FindFieldByName(std::string(f.name)), peak.*f.member);
  }
  return p;
}

PeakTflops FromProto(const v1::PeakTflops& p) {
  PeakTflops peak;
  const google::protobuf::Descriptor* d = p.GetDescriptor();
  for (const PeakTflopsField& f : kPeakTflopsFields) {
    peak.*f.member = p.GetReflection()->GetDouble(p, d->FindFieldByName(std::string(f.name)));
  }
  return peak;
}

v1::ProxyMeasurement ToProto(const ProxyMeasurement& p) {
  v1::ProxyMeasurement out;
  out.set_proxy(p.proxy);
  out.set_strategy_text(p.strategy_text);
  *out.mutable_measured() = ToProto(p.measured);
  out.set_step_time_low_s(p.step_time_low_s);
  out.set_step_time_high_s(p.step_time_high_s);
  out.set_relative_uncertainty(p.relative_uncertainty);
  return out;
}

v1::Prediction ToProto(const TrialPrediction& p) {
  v1::Prediction out;
  out.set_step_time_s(p.step_time_s);
  out.set_peak_memory_bytes(p.peak_memory_bytes);
  out.set_tokens_per_second(p.tokens_per_second);
  return out;
}

TrialPrediction FromProto(const v1::Prediction& p) {
  TrialPrediction out;
  out.step_time_s = p.step_time_s();
  out.peak_memory_bytes = p.peak_memory_bytes();
  out.tokens_per_second = p.tokens_per_second();
  return out;
}

double UnixSecondsOrZero(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return 0;
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

std::string ProtoToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Fails only on a message that could not be serialised at all (invalid
  // UTF-8 in a string field); proto3 parsing already refuses those.
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

}  // namespace autoaccel
