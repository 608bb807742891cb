#include "server/store/store_columns.h"

#include "nlohmann/json.hpp"

namespace autoaccel::store_internal {

void ColumnCodec<JobState>::Bind(Statement& s, JobState v) { s.Bind(JobStateName(v)); }

absl::Status ColumnCodec<JobState>::Read(const Statement& s, int col, const char*, JobState* v) {
  absl::StatusOr<JobState> state = ParseJobState(s.Text(col));
  if (!state.ok()) return state.status();
  *v = *state;
  return absl::OkStatus();
}

void ColumnCodec<TrialStatus>::Bind(Statement& s, TrialStatus v) { s.Bind(TrialStatusName(v)); }

absl::Status ColumnCodec<TrialStatus>::Read(const Statement& s, int col, const char*,
                                            TrialStatus* v) {
  absl::StatusOr<TrialStatus> status = ParseTrialStatus(s.Text(col));
  if (!status.ok()) return status.status();
  *v = *status;
  return absl::OkStatus();
}

void ColumnCodec<TrialMetrics>::Bind(Statement& s, const TrialMetrics& v) {
  s.Bind(TrialMetricsToJson(v).dump());
}

absl::Status ColumnCodec<TrialMetrics>::Read(const Statement& s, int col, const char*,
                                             TrialMetrics* v) {
  nlohmann::json j = nlohmann::json::parse(s.Text(col), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError("metrics are not valid JSON");
  absl::StatusOr<TrialMetrics> m = TrialMetricsFromJson(j);
  if (!m.ok()) return m.status();
  *v = *std::move(m);
  return absl::OkStatus();
}

void ColumnCodec<std::vector<std::string>>::Bind(Statement& s, const std::vector<std::string>& v) {
  s.Bind(nlohmann::json(v).dump());
}

absl::Status ColumnCodec<std::vector<std::string>>::Read(const Statement& s, int col,
                                                         const char* column,
                                                         std::vector<std::string>* v) {
  nlohmann::json array = nlohmann::json::parse(s.Text(col), nullptr, /*allow_exceptions=*/false);
  if (!array.is_array()) {
    return absl::DataLossError(absl::StrCat(column, " is not a JSON array"));
  }
  v->clear();
  for (const nlohmann::json& entry : array) {
    if (entry.is_string()) v->push_back(entry.get<std::string>());
  }
  return absl::OkStatus();
}

void ColumnCodec<AnswerCertainty>::Bind(Statement& s, const AnswerCertainty& v) {
  if (v.certainty.empty()) {
    s.Bind(std::string());
    return;
  }
  s.Bind(nlohmann::json{{"certainty", v.certainty},
                        {"figure", v.figure},
                        {"interval", {v.interval_low, v.interval_high}},
                        {"spread", v.spread},
                        {"measurements", v.measurements},
                        {"tied_with", v.tied_with}}
             .dump());
}

absl::Status ColumnCodec<AnswerCertainty>::Read(const Statement& s, int col, const char* column,
                                                AnswerCertainty* v) {
  *v = AnswerCertainty();
  const std::string text = s.Text(col);
  if (text.empty()) return absl::OkStatus();
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto number = [&j](const char* key) { return j.contains(key) && j[key].is_number(); };
  if (!j.is_object() || !j.contains("certainty") || !j["certainty"].is_string() ||
      !number("figure") || !number("spread") || !number("measurements") ||
      !j.contains("interval") || !j["interval"].is_array() || j["interval"].size() != 2 ||
      !j["interval"][0].is_number() || !j["interval"][1].is_number() || !j.contains("tied_with") ||
      !j["tied_with"].is_array()) {
    return absl::DataLossError(absl::StrCat(column, " is malformed"));
  }
  v->certainty = j["certainty"].get<std::string>();
  v->figure = j["figure"].get<double>();
  v->interval_low = j["interval"][0].get<double>();
  v->interval_high = j["interval"][1].get<double>();
  v->spread = j["spread"].get<double>();
  v->measurements = j["measurements"].get<int>();
  for (const nlohmann::json& entry : j["tied_with"]) {
    if (entry.is_string()) v->tied_with.push_back(entry.get<std::string>());
  }
  return absl::OkStatus();
}

}  // namespace autoaccel::store_internal
