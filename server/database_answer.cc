#include "server/database_answer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/engine_version.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "server/job_view.h"
#include "server/settle.h"
#include "spec/strategy.h"

namespace autoaccel {
namespace {

// "job J, 1234 tokens/s": which answer, in a few words.
std::string Provenance(const StrategyRecord& r) {
  return absl::StrFormat("job %s, %.0f tokens/s%s", r.job_id, r.metrics.tokens_per_second,
                         r.confirmed ? ", confirmed" : "");
}

}  // namespace

std::string EngineVersionName(int version) {
  return version > 0 ? absl::StrCat("engine v", version) : "an unversioned engine";
}

StoredAnswerVerdict JudgeStoredAnswer(const JobSpec& spec,
                                      const std::optional<StrategyRecord>& stored) {
  StoredAnswerVerdict verdict;
  if (!stored.has_value()) return verdict;
  if (stored->engine_version != kEngineVersion) {
    verdict.why_not =
        absl::StrCat("the strategy database's answer (", Provenance(*stored), ") was measured by ",
                     EngineVersionName(stored->engine_version), ", this server runs ",
                     EngineVersionName(kEngineVersion), ": tuning again");
    return verdict;
  }
  if (spec.load.has_value() && !spec.finetune) {
    verdict.why_not =
        "load_strategy runs the loaded strategy, so the strategy database does not answer "
        "(with finetune it may)";
    return verdict;
  }
  absl::StatusOr<Strategy> strategy = ParseStrategyText(stored->strategy_text);
  if (!strategy.ok()) {
    verdict.why_not = absl::StrCat("the strategy database's answer does not parse (",
                                   strategy.status().message(), "): tuning again");
    return verdict;
  }
  // --load-strategy --finetune: the user fixed these values; an answer that
  // changes one of them is not theirs (the search may still move away from
  // them, and says so as it goes).
  if (spec.load.has_value() && !spec.load->Matches(*strategy)) {
    verdict.why_not = absl::StrCat("the strategy database's answer ", stored->strategy_text, " (",
                                   Provenance(*stored), ") does not keep the loaded strategy's ",
                                   spec.load->ToText(), ": tuning from it");
    return verdict;
  }
  if (std::find(spec.space.begin(), spec.space.end(), *strategy) == spec.space.end()) {
    verdict.why_not =
        absl::StrCat("the strategy database's answer ", stored->strategy_text, " (",
                     Provenance(*stored), ") is outside this request's candidates: tuning");
    return verdict;
  }
  verdict.answers = true;
  return verdict;
}

absl::Status AnswerJobFromDatabase(const StrategyRecord& answer, absl::Time now,
                                   JobRecord* record) {
  ASSIGN_OR_RETURN(v1::StrategyAnswer proto, StrategyAnswerToProto(answer));
  record->state = JobState::kSucceeded;
  record->created_at = now;
  record->started_at = now;
  record->finished_at = now;
  record->deadline = now;
  record->trials_total = 0;
  record->best_trial_id.clear();
  record->algorithm = "answered from the strategy database";
  record->answered_from = ProtoToJson(proto);
  const AnswerCertainty& c = answer.certainty;
  const std::string certainty =
      c.certainty.empty()
          ? std::string(answer.confirmed ? "measured again" : "measured once")
          : absl::StrCat(c.certainty, ": ",
                         MeasuredText(c.measurements, c.spread, c.interval_low, c.interval_high));
  record->status_message = absl::StrFormat(
      "answered from the strategy database: %s at %.0f tokens/s on %s (job %s of %s, %s; %s); no "
      "trial run, --force tunes again",
      answer.strategy_text, answer.metrics.tokens_per_second, answer.hardware, answer.job_id,
      absl::FormatTime("%Y-%m-%d %H:%M UTC", answer.updated_at, absl::UTCTimeZone()),
      EngineVersionName(answer.engine_version), certainty);
  return absl::OkStatus();
}

std::string DescribeAnswerOffer(const StrategyRecord& candidate,
                                const std::optional<StrategyRecord>& stored) {
  if (!stored.has_value()) return "; stored in the strategy database";
  const bool slower = candidate.metrics.tokens_per_second < stored->metrics.tokens_per_second;
  const bool newer = candidate.engine_version > stored->engine_version;
  if (ReplacesStoredAnswer(candidate, *stored)) {
    return absl::StrCat(
        "; replaces the strategy database's answer",
        newer ? absl::StrCat(" measured by ", EngineVersionName(stored->engine_version)) : "", " (",
        Provenance(*stored), ")",
        newer && slower ? absl::StrCat(" although slower: an older engine's figures give way to ",
                                       EngineVersionName(candidate.engine_version), "'s")
                        : "");
  }
  if (candidate.engine_version < stored->engine_version) {
    return absl::StrCat("; not stored: the strategy database's answer (", Provenance(*stored),
                        ") was measured by ", EngineVersionName(stored->engine_version),
                        ", newer than this server's ", EngineVersionName(candidate.engine_version));
  }
  return absl::StrCat("; the strategy database keeps its answer (", Provenance(*stored), ")");
}

bool ReplacesStoredAnswer(const StrategyRecord& candidate, const StrategyRecord& stored) {
  if (candidate.engine_version != stored.engine_version) {
    return candidate.engine_version > stored.engine_version;
  }
  if (candidate.confirmed != stored.confirmed) return candidate.confirmed;
  return stored.metrics.tokens_per_second <= candidate.metrics.tokens_per_second;
}

}  // namespace autoaccel
