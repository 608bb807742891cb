#include "server/job_resume.h"

#include <google/protobuf/util/json_util.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "proto/autoaccel.pb.h"
#include "server/signature.h"

namespace autoaccel {
namespace {

absl::Status CannotResume(const std::string& what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("cannot resume: ", what, " (", why, ")"));
}

// The trial's ranks still run on their workers, perhaps: it waits for them
// to report them (RUNNING, counted as running).
void AwaitReattach(JobRun* job, TrialRun* trial, absl::Time until) {
  trial->awaiting_reattach = true;
  trial->reattach_until = until;
  trial->ranks.clear();
  for (absl::string_view worker : absl::StrSplit(trial->record.worker_id, ',')) {
    Rank rank;
    rank.placed.worker_id = std::string(worker);
    trial->ranks.push_back(std::move(rank));
  }
  trial->ranks_pending = static_cast<int>(trial->ranks.size());
  trial->ranks_attached = 0;
  ++job->running;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobRun>> ResumeJob(const JobRecord& record,
                                                  std::vector<TrialRecord> trials,
                                                  const TuneDefaults& defaults,
                                                  absl::Time reattach_until,
                                                  std::optional<std::string> model_file) {
  v1::TuneRequest request;
  if (auto s = google::protobuf::util::JsonStringToMessage(record.request_json, &request);
      !s.ok()) {
    return CannotResume("its stored request does not parse", s.ToString());
  }
  if (request.model().family() == "torchscript") {
    if (!model_file) {
      return CannotResume("its model file was not kept",
                          "submit it again; a coordinator keeps it from this version on");
    }
    *request.mutable_model()->mutable_script() = *std::move(model_file);
  }
  std::optional<v1::Launcher> launcher;
  if (!record.launcher_json.empty()) {
    launcher.emplace();
    if (auto s = google::protobuf::util::JsonStringToMessage(record.launcher_json, &*launcher);
        !s.ok()) {
      return CannotResume("its stored launcher does not parse", s.ToString());
    }
  }
  absl::StatusOr<JobSpec> spec =
      ValidateTuneRequest(request, defaults, launcher ? &*launcher : nullptr);
  if (!spec.ok()) return CannotResume("its stored request is refused now", spec.status().message());
  spec->script.reset();
  if (ComputeSignature(spec->model, spec->seq_len, spec->global_batch_size, spec->world_size,
                       spec->device_type,
                       spec->launcher ? &*spec->launcher : nullptr) != record.signature) {
    return CannotResume("its model no longer matches the job's signature",
                        "its model file changed on the coordinator's disk");
  }

  auto job = std::make_unique<JobRun>();
  job->spec = *std::move(spec);
  job->record = record;
  job->version = 1;
  for (TrialRecord& rec : trials) {
    absl::StatusOr<Strategy> strategy = ParseStrategyText(rec.strategy_text);
    if (!strategy.ok()) {
      return CannotResume(absl::StrCat("trial ", rec.trial_id, "'s strategy does not parse"),
                          strategy.status().message());
    }
    auto trial = std::make_unique<TrialRun>();
    trial->strategy = *std::move(strategy);
    trial->record = std::move(rec);
    trial->version = 1;
    job->trials.push_back(std::move(trial));
  }
  for (const auto& t : job->trials) {
    TrialRecord& rec = t->record;
    if (rec.status == TrialStatus::kRunning) {
      AwaitReattach(job.get(), t.get(), reattach_until);
    } else if (rec.status == TrialStatus::kPending) {
      // Waiting already: for its next attempt (it has failed ones), or to
      // measure a trial again.
      if (rec.failed_attempts.empty() && !rec.confirms.empty()) {
        job->confirmations.push_back(t.get());
      } else {
        job->retries.push_back(t.get());
      }
    }
  }
  for (const auto& t : job->trials) {
    if (!t->record.confirms.empty()) {  // the earlier process had ended the search
      job->search_ended = WhySearchEnded(*job);
      break;
    }
  }
  return job;
}

std::vector<ResumedTrial> ResumedTrials(const JobRun& job) {
  std::vector<ResumedTrial> out;
  for (const auto& t : job.trials) {
    const TrialRecord& rec = t->record;
    if (!rec.confirms.empty()) continue;
    ResumedTrial r;
    r.trial = ScoredOf(*t);
    r.measured_steps = rec.measured_steps;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace autoaccel
