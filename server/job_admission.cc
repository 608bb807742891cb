#include "server/job_admission.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/json_log.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "server/database_answer.h"
#include "server/launcher_job.h"
#include "server/signature.h"

namespace autoaccel {

absl::StatusOr<AdmittedJob> JobAdmission::Admit(v1::TuneRequest request, const std::string& owner) {
  const std::string job_id = NewJobId();
  // A launcher job's launcher, as the workers define it (server/launcher_job.h).
  std::optional<v1::Launcher> launcher;
  if (!request.launcher().empty()) {
    ASSIGN_OR_RETURN(launcher, pool_->FindLauncher(request.launcher()));
  }
  ASSIGN_OR_RETURN(JobSpec spec, ValidateTuneRequest(std::move(request), defaults_,
                                                     launcher ? &*launcher : nullptr));
  const std::string signature =
      ComputeSignature(spec.model, spec.seq_len, spec.global_batch_size, spec.world_size,
                       spec.device_type, spec.launcher ? &*spec.launcher : nullptr);
  // The strategy database may answer at once (server/database_answer.h); a
  // database that cannot be read leaves the job to tune.
  std::optional<StrategyRecord> stored;
  StoredAnswerVerdict verdict;
  if (!spec.force) {
    absl::StatusOr<std::optional<StrategyRecord>> found = store_->GetStrategy(signature);
    if (found.ok()) {
      stored = *std::move(found);
      verdict = JudgeStoredAnswer(spec, stored);
    } else {
      spdlog::warn("reading the strategy database's answer for {} failed: {}; tuning", signature,
                   found.status().ToString());
    }
  }
  AdmittedJob out;
  out.answered = verdict.answers;
  out.job = std::make_unique<JobRun>();
  JobRun& job = *out.job;
  // The warm start (server/warm_start.h: one store read serves a burst of
  // submissions); a job the database answers runs no trial and needs none,
  // and a launcher job starts cold: its script's speed is not the engine's.
  if (!verdict.answers && !spec.model.IsTorchScript() && !spec.launcher) {
    absl::StatusOr<std::shared_ptr<const EarlierTrials>> loaded =
        earlier_trials_->Get(spec.device_type);
    if (loaded.ok()) {
      job.earlier = *std::move(loaded);
    } else {
      spdlog::warn("reading earlier trials for a warm start failed, the job starts cold: {}",
                   loaded.status().ToString());
    }
  }
  // A torchscript job's file goes to disk under the job's id (caps checked
  // there).
  if (spec.script && !verdict.answers) {
    ASSIGN_OR_RETURN(spec.model_file,
                     model_files_->Put(job_id, owner, spec.model.script_digest, *spec.script));
  }
  spec.script.reset();
  JobRecord& rec = job.record;
  rec.job_id = job_id;
  rec.state = JobState::kQueued;
  rec.status_message = verdict.why_not.empty() ? "queued" : "queued; " + verdict.why_not;
  rec.request_json = ProtoToJson(spec.request);
  rec.model_json = MeasuredModelJson(spec);
  rec.owner = owner;
  rec.signature = signature;
  rec.created_at = clock_->Now();
  rec.deadline = rec.created_at + spec.time_limit;
  rec.trials_total = spec.load && !spec.finetune ? 1 : static_cast<int>(spec.space.size());
  if (spec.launcher) rec.launcher_json = ProtoToJson(*spec.launcher);
  if (verdict.answers) RETURN_IF_ERROR(AnswerJobFromDatabase(*stored, rec.created_at, &rec));
  job.spec = std::move(spec);
  return out;
}

absl::Status JobAdmission::Create(JobRun* job, bool answered) {
  JobRecord& rec = job->record;
  absl::Status created = store_->CreateJob(rec);
  // Another id if this one is taken (about one in a billion; a model file
  // kept under the first id is not renamed: the job cannot be created then).
  for (int retry = 0; absl::IsAlreadyExists(created) && !job->spec.model_file && retry < 3;
       ++retry) {
    rec.job_id = NewJobId();
    created = store_->CreateJob(rec);
  }
  RETURN_IF_ERROR(created);
  const LogContext context(rec.job_id);
  if (answered) {
    spdlog::info("job {}: {}", rec.job_id, rec.status_message);
    return absl::OkStatus();
  }
  const JobSpec& s = job->spec;
  spdlog::info(
      "job {}: submitted ({}{} {} layers, seq {}, batch {}, {} candidates, limit {}s; {} earlier "
      "trials to warm its cost model, {} unreadable)",
      rec.job_id, s.launcher ? absl::StrCat("launcher ", s.launcher->name(), ", ") : "",
      IsUnknownLauncherModel(s.model) ? "undescribed model," : s.model.family, s.model.n_layer,
      s.seq_len, s.global_batch_size, rec.trials_total, absl::ToDoubleSeconds(s.time_limit),
      job->earlier ? job->earlier->trials.size() : 0, job->earlier ? job->earlier->skipped : 0);
  return absl::OkStatus();
}

std::string JobAdmission::NewJobId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("job-%s-%012x",
                         absl::FormatTime("%Y%m%d-%H%M%S", clock_->Now(), absl::UTCTimeZone()),
                         (rng() ^ ++job_counter_) & 0xffffffffffffULL);
}

}  // namespace autoaccel
