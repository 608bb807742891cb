#include "search/trial.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/enum_names.h"

namespace autoaccel {
namespace {

constexpr std::pair<TrialStatus, absl::string_view> kStatuses[] = {
    {TrialStatus::kPending, "PENDING"},     {TrialStatus::kRunning, "RUNNING"},
    {TrialStatus::kSucceeded, "SUCCEEDED"}, {TrialStatus::kOom, "OOM"},
    {TrialStatus::kFailed, "FAILED"},       {TrialStatus::kTimeout, "TIMEOUT"},
    {TrialStatus::kPruned, "PRUNED"},       {TrialStatus::kCancelled, "CANCELLED"},
};

}  // namespace

absl::string_view TrialStatusName(TrialStatus s) { return EnumName(kStatuses, s, "UNKNOWN"); }

absl::StatusOr<TrialStatus> ParseTrialStatus(absl::string_view name) {
  if (std::optional<TrialStatus> s = EnumFromName(kStatuses, name)) return *s;
  return absl::InvalidArgumentError(absl::StrCat("trial status: unknown value '", name, "'"));
}

bool IsTerminal(TrialStatus s) { return s != TrialStatus::kPending && s != TrialStatus::kRunning; }

double PeakTflops::For(Precision p) const {
  switch (p) {
    case Precision::kBf16:
    case Precision::kPureBf16:
      return bf16;
    case Precision::kFp16:
      return fp16;
    case Precision::kFp32:
      break;
  }
  return fp32;
}

nlohmann::json PeakTflopsToJson(const PeakTflops& p) {
  return nlohmann::json{{"fp32", p.fp32}, {"bf16", p.bf16}, {"fp16", p.fp16}};
}

absl::StatusOr<PeakTflops> PeakTflopsFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("peak_tflops: expected a JSON object");
  PeakTflops p;
  for (auto [key, out] :
       {std::pair<const char*, double*>{"fp32", &p.fp32}, {"bf16", &p.bf16}, {"fp16", &p.fp16}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number() || it->get<double>() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("peak_tflops.", key, ": expected a non-negative number"));
    }
    *out = it->get<double>();
  }
  return p;
}

nlohmann::json TrialMetricsToJson(const TrialMetrics& m) {
  return nlohmann::json{{"measured_steps", m.measured_steps},
                        {"step_time_median_s", m.step_time_median_s},
                        {"step_time_min_s", m.step_time_min_s},
                        {"step_time_max_s", m.step_time_max_s},
                        {"step_time_spread", m.step_time_spread},
                        {"tokens_per_second", m.tokens_per_second},
                        {"samples_per_second", m.samples_per_second},
                        {"achieved_tflops", m.achieved_tflops},
                        {"peak_memory_bytes", m.peak_memory_bytes},
                        {"peak_rss_bytes", m.peak_rss_bytes},
                        {"final_loss", m.final_loss},
                        {"skipped_steps", m.skipped_steps},
                        {"mfu", m.mfu},
                        {"peak_tflops", m.peak_tflops},
                        {"comm_time_s", m.comm_time_s},
                        {"state_memory_bytes", m.state_memory_bytes},
                        {"rank_peak_memory_bytes", m.rank_peak_memory_bytes},
                        {"noisy", m.IsNoisy()}};
}

absl::StatusOr<TrialMetrics> TrialMetricsFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("metrics: expected a JSON object");
  TrialMetrics m;
  auto num = [&](const char* key, auto* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number()) {
      return absl::InvalidArgumentError(absl::StrCat("metrics.", key, ": expected a number"));
    }
    *out = it->get<std::remove_pointer_t<decltype(out)>>();
    return absl::OkStatus();
  };
  for (absl::Status s :
       {num("measured_steps", &m.measured_steps), num("step_time_median_s", &m.step_time_median_s),
        num("step_time_min_s", &m.step_time_min_s), num("step_time_max_s", &m.step_time_max_s),
        num("step_time_spread", &m.step_time_spread),
        num("tokens_per_second", &m.tokens_per_second),
        num("samples_per_second", &m.samples_per_second),
        num("achieved_tflops", &m.achieved_tflops), num("peak_memory_bytes", &m.peak_memory_bytes),
        num("peak_rss_bytes", &m.peak_rss_bytes), num("final_loss", &m.final_loss),
        num("mfu", &m.mfu), num("peak_tflops", &m.peak_tflops),
        num("skipped_steps", &m.skipped_steps), num("comm_time_s", &m.comm_time_s),
        num("state_memory_bytes", &m.state_memory_bytes)}) {
    if (!s.ok()) return s;
  }
  if (auto it = j.find("rank_peak_memory_bytes"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError("metrics.rank_peak_memory_bytes: expected an array");
    }
    for (const nlohmann::json& v : *it) {
      if (!v.is_number_integer()) {
        return absl::InvalidArgumentError(
            "metrics.rank_peak_memory_bytes: expected whole numbers of bytes");
      }
      m.rank_peak_memory_bytes.push_back(v.get<int64_t>());
    }
  }
  return m;
}

}  // namespace autoaccel
