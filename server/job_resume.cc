#include "server/job_resume.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "proto/autoaccel.pb.h"
#include "server/signature.h"
#include "server/warm_start.h"

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

absl::StatusOr<std::vector<std::unique_ptr<JobRun>>> LoadUnfinishedJobs(const ResumeSources& in) {
  const absl::Time now = in.now;
  ASSIGN_OR_RETURN(std::vector<JobRecord> unfinished, in.store->ListUnfinishedJobs());
  std::vector<std::unique_ptr<JobRun>> out;
  std::set<std::string> resumed_ids;
  for (JobRecord& record : unfinished) {
    ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, in.store->ListTrials(record.job_id));
    // A torchscript job's file, as this or an earlier process kept it.
    absl::StatusOr<ModelFileRef> kept = in.model_files->Adopt(record.job_id, record.owner, "");
    std::optional<std::string> model_file;
    if (kept.ok()) {
      absl::StatusOr<std::string> bytes = in.model_files->Read(*kept);
      if (bytes.ok()) model_file = *std::move(bytes);
    }
    absl::StatusOr<std::unique_ptr<JobRun>> resumed =
        ResumeJob(record, trials, in.defaults, now + in.reattach_window, std::move(model_file));
    if (!resumed.ok()) {
      in.model_files->Remove(record.job_id);
      RETURN_IF_ERROR(in.archive->CloseUnfinished(std::move(record), std::move(trials),
                                                  std::string(resumed.status().message()), now));
      continue;
    }
    std::unique_ptr<JobRun> job = *std::move(resumed);
    if (job->spec.model.IsTorchScript() && kept.ok()) {
      kept->digest = job->spec.model.script_digest;
      job->spec.model_file = *kept;
    } else {
      in.model_files->Remove(record.job_id);
    }
    const JobSpec& spec = job->spec;
    if (!spec.model.IsTorchScript() && !spec.launcher) {  // as SubmitJob warms it
      absl::StatusOr<EarlierTrials> earlier =
          LoadEarlierTrials(in.store, spec.device_type, kMaxEarlierTrials, record.job_id);
      if (earlier.ok()) job->earlier = std::make_shared<const EarlierTrials>(*std::move(earlier));
    }
    job->record.status_message = absl::StrCat(
        "resumed after a coordinator restart (", job->trials.size(), " trial(s) recorded",
        job->running > 0 ? absl::StrCat(", ", job->running, " waiting for their workers") : "",
        ")");
    RETURN_IF_ERROR(in.store->UpdateJob(job->record));
    spdlog::warn("job {}: {}; its time limit counts from its submission ({} left)", record.job_id,
                 job->record.status_message,
                 absl::FormatDuration(std::max(absl::ZeroDuration(), job->record.deadline - now)));
    resumed_ids.insert(record.job_id);
    out.push_back(std::move(job));
  }
  // Files of jobs that finished while no process could delete them.
  if (const int removed = in.model_files->RemoveAllBut(resumed_ids); removed > 0) {
    spdlog::info("deleted {} model file(s) of finished jobs from {}", removed,
                 in.model_files->dir());
  }
  return out;
}

}  // namespace autoaccel
