#include "server/job_outcome.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/engine_version.h"
#include "server/answer.h"
#include "server/database_answer.h"
#include "server/job_view.h"
#include "server/launcher_job.h"
#include "server/signature.h"

namespace autoaccel {
namespace {

// "; no trial succeeded (3 FAILED, 1 OOM)" and the like.
std::string WhyNoAnswer(const std::vector<TrialRecord>& trials) {
  std::map<std::string, int> counts;
  int noisy = 0, succeeded = 0;
  for (const TrialRecord& t : trials) {
    counts[std::string(TrialStatusName(t.status))]++;
    succeeded += t.status == TrialStatus::kSucceeded;
    noisy += t.status == TrialStatus::kSucceeded && t.metrics.IsNoisy();
  }
  std::vector<std::string> parts;
  for (const auto& [name, n] : counts) parts.push_back(absl::StrCat(n, " ", name));
  return absl::StrCat(noisy > 0 && noisy == succeeded
                          ? "; every measurement was noisy and none could be repeated in time"
                          : "; no trial succeeded",
                      parts.empty() ? std::string(" (no trial ran)")
                                    : absl::StrCat(" (", absl::StrJoin(parts, ", "), ")"));
}

// "(settled: measured 3 times, spread 2%, 95% interval 980-1020 tokens/s;
// first 1050 tokens/s)" and the like: how sure the answer is.
std::string DescribeCertainty(const Answer& a, double tolerance) {
  if (a.measurements < 2) {
    return absl::StrCat("(", a.certainty == Certainty::kTie ? "a tie, " : "provisional: ",
                        "measured once: no time was left to measure it again)");
  }
  const std::string measured =
      absl::StrFormat("%s; first %.0f tokens/s",
                      MeasuredText(a.measurements, a.spread, a.interval.low, a.interval.high),
                      a.first_tokens_per_second);
  switch (a.certainty) {
    case Certainty::kSettled:
      return absl::StrCat("(settled: ", measured, ")");
    case Certainty::kTie: {
      std::vector<std::string> others;
      for (const auto& [text, figure] : a.tied_with) {
        others.push_back(absl::StrFormat("%s at %.0f tokens/s", text, figure));
      }
      return absl::StrCat("(a tie: ", measured, "; within the measurements' uncertainty of ",
                          absl::StrJoin(others, ", "), ": the simplest answers)");
    }
    default:
      return absl::StrFormat(
          "(provisional: %s; the measurements differ by more than the %.0f%% "
          "tolerance, and neither the time left nor %d measurements settled "
          "them)",
          measured, 100 * tolerance, kMaxMeasurements);
  }
}

// How many workers a trial record's worker_id names ("w1,w2": 2; "": 0).
int GangSize(const std::string& worker_ids) {
  return worker_ids.empty()
             ? 0
             : static_cast<int>(std::count(worker_ids.begin(), worker_ids.end(), ',')) + 1;
}

// What a proxy job's full-size check found: "; checked at full size: ..."
// with the extrapolation's error, or how the check ended; "" without one.
std::string FullSizeCheckNote(const std::vector<TrialRecord>& trials) {
  const TrialRecord* check = nullptr;
  for (const TrialRecord& t : trials) {
    if (t.full_size) check = &t;
  }
  if (check == nullptr || !IsTerminal(check->status)) return "";
  if (check->status != TrialStatus::kSucceeded) {
    return absl::StrCat("; the full-size check (trial ", check->index, ") ended ",
                        TrialStatusName(check->status),
                        check->reason.empty() ? "" : absl::StrCat(": ", check->reason));
  }
  const TrialRecord* proxy = nullptr;
  for (const TrialRecord& t : trials) {
    if (t.trial_id == check->confirms) proxy = &t;
  }
  const double measured = check->metrics.tokens_per_second;
  if (proxy == nullptr || measured <= 0) return "";
  return absl::StrFormat(
      "; checked at full size (trial %d): measured %.0f tokens/s where its proxy trial %d "
      "extrapolated %.0f (%+.1f%%)",
      check->index, measured, proxy->index, proxy->metrics.tokens_per_second,
      100 * (proxy->metrics.tokens_per_second / measured - 1));
}

}  // namespace

JobOutcome DecideJobOutcome(const JobRecord& record, const JobSpec& spec,
                            const std::vector<TrialRecord>& trials, JobState state,
                            const std::string& message, absl::Time finished_at,
                            const absl::StatusOr<std::optional<StrategyRecord>>& stored,
                            int workers) {
  JobOutcome out;
  const Answer answer = ChooseAnswer(trials, 0, ConfirmTolerance(spec.request));
  out.best_trial_id = answer.trial_id;
  const TrialRecord* best = nullptr;
  for (const TrialRecord& t : trials) {
    if (t.trial_id == out.best_trial_id) best = &t;
  }
  if (state == JobState::kSucceeded && best == nullptr) {
    state = JobState::kFailed;
    out.status_message = absl::StrCat(message, WhyNoAnswer(trials));
  } else if (best != nullptr) {
    int run = 0, pruned = 0;
    for (const TrialRecord& t : trials) ++(t.status == TrialStatus::kPruned ? pruned : run);
    out.status_message = absl::StrFormat(
        "%s; best %s at %.0f tokens/s %s after %d trial(s)%s", message, best->strategy_text,
        answer.figure, DescribeCertainty(answer, ConfirmTolerance(spec.request)), run,
        pruned > 0 ? absl::StrFormat(" (%d candidate(s) pruned)", pruned) : "");
    absl::StrAppend(&out.status_message, FullSizeCheckNote(trials));
  } else {
    out.status_message = message;
  }
  const InfrastructureSummary infra = SummariseInfrastructure(trials);
  const bool partial = infra.trials_lost > 0;
  if (partial) {
    absl::StrAppend(&out.status_message, "; partial evidence: ", infra.trials_lost,
                    " trial(s) lost to infrastructure failures after every retry (",
                    infra.reasons.front(), ")");
    if (best != nullptr && !spec.store_partial) {
      absl::StrAppend(&out.status_message,
                      "; not stored as the signature's answer (store_partial stores it)");
    }
  } else if (infra.failures > 0) {
    absl::StrAppend(&out.status_message, "; ", infra.failures,
                    " attempt(s) retried after infrastructure failures");
  }
  out.state = state;
  const bool offered =
      state == JobState::kSucceeded && best != nullptr && (!partial || spec.store_partial);
  // Resting on one gang's word although the pool has workers outside that
  // gang that could have repeated the measurement.
  const std::string gang = answer.measured_on.empty() ? "" : answer.measured_on.front();
  const bool one_workers_word = answer.measured_on.size() < 2 && workers > GangSize(gang);
  // A proxy job's answer is a prediction from proxy measurements: the
  // database keeps what was measured at full size.
  if (offered && best->proxy) {
    absl::StrAppend(&out.status_message, "; extrapolated from proxy trials (", best->proxy->proxy,
                    "), so not stored in the strategy database");
  } else if (offered && one_workers_word) {
    absl::StrAppend(
        &out.status_message, "; not stored in the strategy database: measured on worker ", gang,
        " only, and the pool has ", workers, " (an answer is stored once two workers measured it)");
  }
  if (offered && !one_workers_word && !best->proxy) {
    StrategyRecord s;
    s.signature = record.signature;
    // A launcher job's answer measured the user's script: named by its
    // launcher ("launcher:hf-llama", ":llama" when the model was described).
    s.model_family = spec.launcher ? absl::StrCat("launcher:", spec.launcher->name(),
                                                  IsUnknownLauncherModel(spec.model)
                                                      ? ""
                                                      : absl::StrCat(":", spec.model.family))
                                   : spec.model.family;
    s.model_config_json = spec.model.ToConfigJson().dump();
    s.seq_len = spec.seq_len;
    s.global_batch_size = spec.global_batch_size;
    s.hardware = HardwareName(spec.device_type, spec.world_size);
    s.device_type = spec.device_type;
    s.strategy_text = best->strategy_text;
    s.strategy_json = best->strategy_json;
    s.metrics = best->metrics;
    s.job_id = record.job_id;
    s.updated_at = finished_at;
    s.confirmed = answer.confirmed;
    s.certainty.certainty = CertaintyName(answer.certainty);
    s.certainty.figure = answer.figure;
    s.certainty.interval_low = answer.interval.low;
    s.certainty.interval_high = answer.interval.high;
    s.certainty.spread = answer.spread;
    s.certainty.measurements = answer.measurements;
    for (const auto& [text, figure] : answer.tied_with) s.certainty.tied_with.push_back(text);
    s.engine_version = kEngineVersion;
    s.created_at = finished_at;
    if (stored.ok()) absl::StrAppend(&out.status_message, DescribeAnswerOffer(s, *stored));
    out.answer = std::move(s);
  }
  return out;
}

}  // namespace autoaccel
