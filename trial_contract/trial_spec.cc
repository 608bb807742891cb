#include "trial_contract/trial_spec.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace autoaccel {

nlohmann::json TrialSpecToJson(const TrialSpec& s) {
  return nlohmann::json{{"trial_id", s.trial_id},
                        {"attempt", s.attempt},
                        {"rank", s.rank},
                        {"world_size", s.world_size},
                        {"local_rank", s.local_rank},
                        {"master_addr", s.master_addr},
                        {"master_port", s.master_port},
                        {"model_family", s.model.family},
                        {"model_config", s.model.ToConfigJson()},
                        {"seq_len", s.seq_len},
                        {"global_batch_size", s.global_batch_size},
                        {"strategy", StrategyToJson(s.strategy)},
                        {"warmup_steps", s.warmup_steps},
                        {"measured_steps", s.measured_steps},
                        {"min_measured_seconds", s.min_measured_seconds},
                        {"memory_limit_bytes", s.memory_limit_bytes},
                        {"device", s.device},
                        {"num_threads", s.num_threads},
                        {"seed", s.seed},
                        {"peak_tflops", PeakTflopsToJson(s.peak_tflops)},
                        {"bucket_bytes", s.bucket_bytes},
                        {"report_parameter_digest", s.report_parameter_digest},
                        {"model_file", s.model_file}};
}

nlohmann::json TrialSpecToRequestJson(const TrialSpec& spec) {
  nlohmann::json j = TrialSpecToJson(spec);
  for (const char* key : kWorkerFilledTrialSpecKeys) j.erase(key);
  return j;
}

absl::StatusOr<TrialSpec> TrialSpecFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("trial spec: expected a JSON object");
  TrialSpec s;
  try {
    s.trial_id = j.value("trial_id", "");
    s.attempt = j.value("attempt", 1);
    s.rank = j.value("rank", 0);
    s.world_size = j.value("world_size", 1);
    s.local_rank = j.value("local_rank", 0);
    s.master_addr = j.value("master_addr", "127.0.0.1");
    s.master_port = j.value("master_port", 0);
    s.seq_len = j.at("seq_len").get<int>();
    s.global_batch_size = j.at("global_batch_size").get<int>();
    s.warmup_steps = j.value("warmup_steps", 2);
    s.measured_steps = j.value("measured_steps", 5);
    s.min_measured_seconds = j.value("min_measured_seconds", 0.0);
    s.memory_limit_bytes = j.value("memory_limit_bytes", int64_t{0});
    s.device = j.value("device", "cpu");
    s.num_threads = j.value("num_threads", 1);
    s.seed = j.value("seed", uint64_t{1234});
    s.model_file = j.value("model_file", "");
    s.bucket_bytes = j.value("bucket_bytes", int64_t{0});
    s.report_parameter_digest = j.value("report_parameter_digest", false);
    ASSIGN_OR_RETURN(
        s.model, ModelSpecFromJson(j.at("model_family").get<std::string>(), j.at("model_config")));
    ASSIGN_OR_RETURN(s.strategy, StrategyFromJson(j.at("strategy")));
    if (j.contains("peak_tflops")) {
      ASSIGN_OR_RETURN(s.peak_tflops, PeakTflopsFromJson(j.at("peak_tflops")));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("trial spec: ", e.what()));
  }
  // Bounded so that no spec can ask for an endless or overflowing run.
  if (s.seq_len <= 0 || s.global_batch_size <= 0 || s.measured_steps <= 0 ||
      s.measured_steps > kMaxTrialSteps || s.warmup_steps < 0 || s.warmup_steps > kMaxTrialSteps ||
      s.world_size <= 0 || s.rank < 0 || s.rank >= s.world_size ||
      !(s.min_measured_seconds >= 0 && s.min_measured_seconds <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trial spec: sizes out of range (seq_len and global_batch_size positive, "
                     "measured_steps 1..",
                     kMaxTrialSteps, ", warmup_steps 0..", kMaxTrialSteps,
                     ", 0 <= rank < world_size, min_measured_seconds 0..3600)"));
  }
  return s;
}

}  // namespace autoaccel
