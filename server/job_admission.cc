#include "server/job_admission.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

#include "common/status_macros.h"
#include "proto/convert.h"
#include "server/database_answer.h"
#include "server/signature.h"

namespace autoaccel {

absl::StatusOr<AdmittedJob> JobAdmission::Admit(v1::TuneRequest request, const std::string& owner,
                                                const std::string& job_id) const {
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

}  // namespace autoaccel
