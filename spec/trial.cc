#include "spec/trial.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "spec/trial_metrics_fields.h"

namespace autoaccel {
namespace {

constexpr std::pair<TrialStatus, absl::string_view> kStatuses[] = {
    {TrialStatus::kPending, "PENDING"},     {TrialStatus::kRunning, "RUNNING"},
    {TrialStatus::kSucceeded, "SUCCEEDED"}, {TrialStatus::kOom, "OOM"},
    {TrialStatus::kFailed, "FAILED"},       {TrialStatus::kTimeout, "TIMEOUT"},
    {TrialStatus::kPruned, "PRUNED"},       {TrialStatus::kCancelled, "CANCELLED"},
};

// j[key] into *out when present and not null: a non-negative number, else
// INVALID_ARGUMENT "<object>.<key>: expected a non-negative number".
absl::Status ReadNonNegative(const nlohmann::json& j, absl::string_view object,
                             absl::string_view key, double* out) {
  auto it = j.find(std::string(key));
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number() || it->get<double>() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(object, ".", key, ": expected a non-negative number"));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

absl::string_view TrialStatusName(TrialStatus s) { return EnumName(kStatuses, s, "UNKNOWN"); }

absl::StatusOr<TrialStatus> ParseTrialStatus(absl::string_view name) {
  if (std::optional<TrialStatus> s = EnumFromName(kStatuses, name)) return *s;
  return absl::InvalidArgumentError(absl::StrCat("trial status: unknown value '", name, "'"));
}

bool IsTerminal(TrialStatus s) { return s != TrialStatus::kPending && s != TrialStatus::kRunning; }

double PeakTflops::*PeakTflops::MemberFor(Precision p) {
  switch (p) {
    case Precision::kBf16:
    case Precision::kPureBf16:
      return &PeakTflops::bf16;
    case Precision::kFp16:
      return &PeakTflops::fp16;
    case Precision::kFp8:
      return &PeakTflops::fp8;
    case Precision::kFp32:
      break;
  }
  return &PeakTflops::fp32;
}

PeakTflops PeakTflops::Max(const PeakTflops& a, const PeakTflops& b) {
  PeakTflops out;
  for (const PeakTflopsField& f : kPeakTflopsFields)
    out.*f.member = std::max(a.*f.member, b.*f.member);
  return out;
}

std::ostream& operator<<(std::ostream& os, const PeakTflops& p) {
  const char* separator = "";
  for (const PeakTflopsField& f : kPeakTflopsFields) {
    os << separator << f.name << " " << p.*f.member;
    separator = ", ";
  }
  return os << " TFLOP/s";
}

nlohmann::json PeakTflopsToJson(const PeakTflops& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const PeakTflopsField& f : kPeakTflopsFields) j[std::string(f.name)] = p.*f.member;
  return j;
}

absl::StatusOr<PeakTflops> PeakTflopsFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("peak_tflops: expected a JSON object");
  PeakTflops p;
  for (const PeakTflopsField& f : kPeakTflopsFields) {
    RETURN_IF_ERROR(ReadNonNegative(j, "peak_tflops", f.name, &(p.*f.member)));
  }
  return p;
}

nlohmann::json TrialPredictionToJson(const TrialPrediction& p) {
  return nlohmann::json{{"step_time_s", p.step_time_s},
                        {"peak_memory_bytes", p.peak_memory_bytes},
                        {"tokens_per_second", p.tokens_per_second}};
}

absl::StatusOr<TrialPrediction> TrialPredictionFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("predicted: expected a JSON object");
  TrialPrediction p;
  double peak_memory_bytes = 0;
  for (auto [key, out] : {std::pair<const char*, double*>{"step_time_s", &p.step_time_s},
                          {"peak_memory_bytes", &peak_memory_bytes},
                          {"tokens_per_second", &p.tokens_per_second}}) {
    RETURN_IF_ERROR(ReadNonNegative(j, "predicted", key, out));
  }
  p.peak_memory_bytes = static_cast<int64_t>(std::llround(peak_memory_bytes));
  return p;
}

nlohmann::json ProxyMeasurementToJson(const ProxyMeasurement& p) {
  return {{"proxy", p.proxy},
          {"strategy", p.strategy_text},
          {"measured", TrialMetricsToJson(p.measured)},
          {"step_time_low_s", p.step_time_low_s},
          {"step_time_high_s", p.step_time_high_s},
          {"relative_uncertainty", p.relative_uncertainty}};
}

absl::StatusOr<ProxyMeasurement> ProxyMeasurementFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("proxy: expected a JSON object");
  ProxyMeasurement p;
  for (auto [key, out] :
       {std::pair<const char*, std::string*>{"proxy", &p.proxy}, {"strategy", &p.strategy_text}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("proxy.", key, ": expected a string"));
    }
    *out = it->get<std::string>();
  }
  for (auto [key, out] : {std::pair<const char*, double*>{"step_time_low_s", &p.step_time_low_s},
                          {"step_time_high_s", &p.step_time_high_s},
                          {"relative_uncertainty", &p.relative_uncertainty}}) {
    RETURN_IF_ERROR(ReadNonNegative(j, "proxy", key, out));
  }
  if (auto it = j.find("measured"); it != j.end() && !it->is_null()) {
    absl::StatusOr<TrialMetrics> m = TrialMetricsFromJson(*it);
    if (!m.ok())
      return absl::InvalidArgumentError(absl::StrCat("proxy.measured: ", m.status().message()));
    p.measured = *std::move(m);
  }
  return p;
}

nlohmann::json TrialMetricsToJson(const TrialMetrics& m) {
  nlohmann::json j = nlohmann::json::object();
  ForEachRow(kTrialMetricsFields,
             [&](const auto& field) { j[std::string(field.name)] = m.*field.member; });
  j["noisy"] = m.IsNoisy();  // derived, for readers of the JSON; not read back
  return j;
}

absl::StatusOr<TrialMetrics> TrialMetricsFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("metrics: expected a JSON object");
  TrialMetrics m;
  absl::Status status;
  AnyRow(kTrialMetricsFields, [&](const auto& field) {
    using T = RowValue<decltype(field)>;
    auto it = j.find(std::string(field.name));
    if (it == j.end() || it->is_null()) return false;
    if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      if (!it->is_array()) {
        status =
            absl::InvalidArgumentError(absl::StrCat("metrics.", field.name, ": expected an array"));
        return true;
      }
      for (const nlohmann::json& v : *it) {
        if (!v.is_number_integer()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("metrics.", field.name, ": expected whole numbers of bytes"));
          return true;
        }
        (m.*field.member).push_back(v.get<int64_t>());
      }
    } else {
      if (!it->is_number()) {
        status =
            absl::InvalidArgumentError(absl::StrCat("metrics.", field.name, ": expected a number"));
        return true;
      }
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (!JsonToInteger(*it, &(m.*field.member))) {
          status = absl::InvalidArgumentError(
              absl::StrCat("metrics.", field.name, ": expected an integer in range"));
          return true;
        }
        return false;
      }
      m.*field.member = it->get<T>();
    }
    return false;
  });
  if (!status.ok()) return status;
  return m;
}

}  // namespace autoaccel
