#include "server/job_view.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "server/answer.h"
#include "server/tune_request.h"
#include "spec/model_spec.h"

namespace autoaccel {
namespace {

// The strategy of a stored row, or DATA_LOSS naming the row.
absl::StatusOr<v1::Strategy> StoredStrategy(const std::string& text, const std::string& row) {
  absl::StatusOr<Strategy> s = ParseStrategyText(text);
  if (!s.ok()) {
    return absl::DataLossError(
        absl::StrCat(row, ": stored strategy '", text, "' does not parse: ", s.status().message()));
  }
  return ToProto(*s);
}

// A job answered from the strategy database: the stored answer it kept, and
// as its best a trial of that answer that no one ran here (no trial_id; the
// job that measured it).
absl::Status AnsweredFromToProto(const JobRecord& r, v1::Job* j) {
  v1::StrategyAnswer* a = j->mutable_answered_from();
  if (auto parsed = google::protobuf::util::JsonStringToMessage(r.answered_from, a); !parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat("job ", r.job_id,
                     ": stored database answer does not parse: ", std::string(parsed.message())));
  }
  v1::Trial* best = j->mutable_best();
  best->set_job_id(a->job_id());
  *best->mutable_strategy() = a->strategy();
  best->set_strategy_json(a->strategy_json());
  best->set_status(std::string(TrialStatusName(TrialStatus::kSucceeded)));
  best->set_reason(
      absl::StrCat("answered from the strategy database (measured by job ", a->job_id(), ")"));
  *best->mutable_metrics() = a->metrics();
  best->set_finished_at(a->updated_at());
  j->set_best_confirmed(a->confirmed());
  return absl::OkStatus();
}

void StandingToProto(const Standing& s, bool answer, v1::StrategyStanding* out) {
  out->set_strategy_text(s.strategy_text);
  out->set_figure(s.figure);
  out->set_interval_low(s.interval.low);
  out->set_interval_high(s.interval.high);
  out->set_spread(s.spread);
  out->set_measurements(s.measurements());
  out->set_agrees(s.agrees);
  if (s.first != nullptr) out->add_trial_indices(s.first->index);
  for (const TrialRecord* t : s.repeats) out->add_trial_indices(t->index);
  out->set_peak_memory_bytes(s.peak_memory_bytes);
  out->set_answer(answer);
}

}  // namespace

absl::StatusOr<v1::Trial> TrialToProto(const TrialRecord& r, const Strategy* typed) {
  v1::Trial t;
  t.set_trial_id(r.trial_id);
  t.set_job_id(r.job_id);
  t.set_index(r.index);
  t.set_attempt(r.attempt);
  if (typed != nullptr) {
    *t.mutable_strategy() = ToProto(*typed);
  } else {
    ASSIGN_OR_RETURN(*t.mutable_strategy(),
                     StoredStrategy(r.strategy_text, absl::StrCat("trial ", r.trial_id)));
  }
  t.set_strategy_json(r.strategy_json);
  t.set_status(std::string(TrialStatusName(r.status)));
  t.set_reason(r.reason);
  *t.mutable_metrics() = ToProto(r.metrics);
  for (absl::string_view w : absl::StrSplit(r.worker_id, ',', absl::SkipEmpty())) {
    t.add_worker_ids(std::string(w));
  }
  t.set_started_at(UnixSecondsOrZero(r.started_at));
  t.set_finished_at(UnixSecondsOrZero(r.finished_at));
  for (const std::string& f : r.failed_attempts) t.add_failed_attempts(f);
  t.set_infrastructure(r.infrastructure);
  t.set_confirms(r.confirms);
  if (r.predicted) *t.mutable_predicted() = ToProto(*r.predicted);
  if (r.proxy) *t.mutable_proxy() = ToProto(*r.proxy);
  t.set_full_size(r.full_size);
  return t;
}

InfrastructureSummary SummariseInfrastructure(const std::vector<TrialRecord>& trials) {
  InfrastructureSummary out;
  auto note = [&](const std::string& reason) {
    if (out.reasons.size() < 5 &&
        std::find(out.reasons.begin(), out.reasons.end(), reason) == out.reasons.end()) {
      out.reasons.push_back(reason);
    }
  };
  for (const TrialRecord& t : trials) {
    out.failures += static_cast<int>(t.failed_attempts.size());
    for (const std::string& f : t.failed_attempts) {
      // "attempt 2: why" -> "why": the same cause reads the same in every trial.
      absl::string_view why = f;
      if (size_t colon = why.find(": ");
          absl::StartsWith(why, "attempt ") && colon != absl::string_view::npos) {
        why.remove_prefix(colon + 2);
      }
      note(std::string(why));
    }
    if (t.infrastructure) ++out.trials_lost;
  }
  return out;
}

size_t TrialsInNextEvent(const std::vector<v1::Trial>& pending, size_t next, size_t max_trials,
                         size_t max_bytes) {
  size_t count = 0, bytes = 0;
  for (size_t i = next; i < pending.size() && count < max_trials; ++i, ++count) {
    // Each repeated element also costs its tag and length (a few bytes).
    bytes += pending[i].ByteSizeLong() + 8;
    if (count > 0 && bytes > max_bytes) break;
  }
  return count;
}

absl::StatusOr<v1::Job> JobRecordToProto(const JobRecord& r, const std::vector<TrialRecord>& trials,
                                         absl::Time now, const v1::TuneRequest* request) {
  v1::Job j;
  j.set_job_id(r.job_id);
  j.set_state(std::string(JobStateName(r.state)));
  j.set_status_message(r.status_message);
  if (request != nullptr) {
    *j.mutable_request() = *request;
  } else if (auto parsed =
                 google::protobuf::util::JsonStringToMessage(r.request_json, j.mutable_request());
             !parsed.ok()) {
    return absl::DataLossError(absl::StrCat(
        "job ", r.job_id, ": stored request does not parse: ", std::string(parsed.message())));
  }
  if (!r.launcher_json.empty()) {
    if (auto parsed =
            google::protobuf::util::JsonStringToMessage(r.launcher_json, j.mutable_launcher());
        !parsed.ok()) {
      return absl::DataLossError(absl::StrCat(
          "job ", r.job_id, ": stored launcher does not parse: ", std::string(parsed.message())));
    }
  }
  j.set_signature(r.signature);
  j.set_owner(r.owner);
  j.set_created_at(UnixSecondsOrZero(r.created_at));
  j.set_started_at(UnixSecondsOrZero(r.started_at));
  j.set_finished_at(UnixSecondsOrZero(r.finished_at));
  j.set_deadline(UnixSecondsOrZero(r.deadline));
  j.set_trials_total(r.trials_total);
  j.set_algorithm(r.algorithm);
  int done = 0, running = 0, pruned = 0;
  std::map<std::string, v1::PrunedSummary> by_kind;
  for (const TrialRecord& t : trials) {
    if (IsTerminal(t.status)) ++done;
    if (t.status == TrialStatus::kPruned) {
      ++pruned;
      const std::string kind = t.reason.substr(0, t.reason.find(": "));
      v1::PrunedSummary& summary = by_kind[kind];
      if (summary.count() == 0) {
        summary.set_kind(kind);
        ASSIGN_OR_RETURN(*summary.mutable_example(), TrialToProto(t));
      }
      summary.set_count(summary.count() + 1);
    }
    if (t.status == TrialStatus::kRunning) ++running;
    if (!r.best_trial_id.empty() && t.trial_id == r.best_trial_id) {
      ASSIGN_OR_RETURN(*j.mutable_best(), TrialToProto(t));
    }
  }
  j.set_trials_done(done);
  j.set_trials_running(running);
  j.set_trials_pruned(pruned);
  std::vector<v1::PrunedSummary> summaries;
  for (auto& [kind, summary] : by_kind) summaries.push_back(std::move(summary));
  std::stable_sort(
      summaries.begin(), summaries.end(),
      [](const v1::PrunedSummary& a, const v1::PrunedSummary& b) { return a.count() > b.count(); });
  for (v1::PrunedSummary& summary : summaries) *j.add_pruned_summary() = std::move(summary);
  const InfrastructureSummary infra = SummariseInfrastructure(trials);
  j.set_infrastructure_failures(infra.failures);
  j.set_trials_lost(infra.trials_lost);
  for (const std::string& reason : infra.reasons) j.add_infrastructure_reasons(reason);
  j.set_partial_evidence(infra.trials_lost > 0);
  if (!r.answered_from.empty()) {
    RETURN_IF_ERROR(AnsweredFromToProto(r, &j));
  } else if (j.has_best()) {
    const Answer answer = ChooseAnswer(trials, 0, ConfirmTolerance(j.request()));
    j.set_best_confirmed(answer.confirmed);
    j.set_best_spread(answer.spread);
    j.set_best_measurements(answer.measurements);
    j.set_best_certainty(CertaintyName(answer.certainty));
    j.set_best_figure(answer.figure);
    j.set_best_interval_low(answer.interval.low);
    j.set_best_interval_high(answer.interval.high);
    for (const auto& [text, figure] : answer.tied_with) j.add_best_tied_with(text);
    for (size_t i = 0; i < answer.standings.ranked.size(); ++i) {
      StandingToProto(answer.standings.ranked[i], static_cast<int>(i) == answer.standings.answer,
                      j.add_standings());
    }
  }
  if (r.created_at != absl::InfinitePast()) {
    const absl::Time end = r.finished_at != absl::InfinitePast() ? r.finished_at : now;
    j.set_elapsed_seconds(absl::ToDoubleSeconds(end - r.created_at));
  }
  return j;
}

namespace {

// The parameters of the answer's model from its stored config: the family
// is the last ":"-part of model_family ("launcher:hf:llama" -> llama); 0 when
// it is no known family or the config does not read.
int64_t StoredModelParameters(const StrategyRecord& r) {
  const size_t colon = r.model_family.rfind(':');
  const std::string family =
      colon == std::string::npos ? r.model_family : r.model_family.substr(colon + 1);
  const nlohmann::json config =
      nlohmann::json::parse(r.model_config_json, nullptr, /*allow_exceptions=*/false);
  if (family == "torchscript" || !config.is_object()) return 0;
  absl::StatusOr<ModelSpec> spec = ModelSpecFromJson(family, config);
  return spec.ok() ? spec->ParameterCount() : 0;
}

}  // namespace

absl::StatusOr<v1::StrategyAnswer> StrategyAnswerToProto(const StrategyRecord& r) {
  v1::StrategyAnswer a;
  a.set_signature(r.signature);
  ASSIGN_OR_RETURN(*a.mutable_strategy(),
                   StoredStrategy(r.strategy_text, absl::StrCat("strategy of ", r.signature)));
  a.set_strategy_json(r.strategy_json);
  *a.mutable_metrics() = ToProto(r.metrics);
  a.set_job_id(r.job_id);
  a.set_updated_at(UnixSecondsOrZero(r.updated_at));
  a.set_hardware(r.hardware);
  a.set_engine_version(absl::StrCat(r.engine_version));
  a.set_created_at(UnixSecondsOrZero(r.created_at));
  a.set_model_family(r.model_family);
  a.set_seq_len(r.seq_len);
  a.set_global_batch_size(r.global_batch_size);
  a.set_confirmed(r.confirmed);
  a.set_parameters(StoredModelParameters(r));
  a.set_certainty(r.certainty.certainty);
  a.set_figure(r.certainty.figure);
  a.set_interval_low(r.certainty.interval_low);
  a.set_interval_high(r.certainty.interval_high);
  a.set_spread(r.certainty.spread);
  a.set_measurements(r.certainty.measurements);
  for (const std::string& t : r.certainty.tied_with) a.add_tied_with(t);
  return a;
}

absl::StatusOr<TrialPage> ParseTrialPage(const v1::ListTrialsRequest& request) {
  if (request.page_size() < 0 || request.page_size() > kMaxTrialsPerPage) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: must be between 0 and ", kMaxTrialsPerPage, ", got ", request.page_size()));
  }
  TrialPage page;
  page.size = request.page_size() == 0 ? kDefaultTrialsPerPage : request.page_size();
  // The token is the proposal index to continue from.
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &page.start) || page.start < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token: '", request.page_token(), "' is not one this server gave"));
  }
  return page;
}

absl::StatusOr<v1::ListTrialsResponse> TrialPageToProto(const std::vector<TrialRecord>& trials,
                                                        const TrialPage& page, bool include_pruned,
                                                        const std::vector<Strategy>* typed) {
  if (typed != nullptr && typed->size() != trials.size()) {
    return absl::InternalError("trial page: one strategy per trial expected");
  }
  v1::ListTrialsResponse response;
  size_t bytes = 0;
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    if (t.index < page.start || (!include_pruned && t.status == TrialStatus::kPruned)) continue;
    if (response.trials_size() == page.size) {
      response.set_next_page_token(absl::StrCat(t.index));
      break;
    }
    ASSIGN_OR_RETURN(v1::Trial trial, TrialToProto(t, typed != nullptr ? &(*typed)[i] : nullptr));
    bytes += trial.ByteSizeLong() + 8;  // with its tag and length
    if (response.trials_size() > 0 && bytes > kMaxTrialBytesPerMessage) {
      response.set_next_page_token(absl::StrCat(t.index));  // a shorter page
      break;
    }
    *response.add_trials() = std::move(trial);
  }
  return response;
}

}  // namespace autoaccel
