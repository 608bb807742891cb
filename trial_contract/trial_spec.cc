#include "trial_contract/trial_spec.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"

namespace autoaccel {

nlohmann::json TrialSpecToJson(const TrialSpec& s) {
  return nlohmann::json{{"trial_id", s.trial_id},
                        {"attempt", s.attempt},
                        {"rank", s.rank},
                        {"world_size", s.world_size},
                        {"local_rank", s.local_rank},
                        {"local_world_size", s.local_world_size},
                        {"group_rank", s.group_rank},
                        {"local_device_indices", s.local_device_indices},
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

namespace {

// The integer at `key` into `*out`, left as it is when the key is absent
// and not `required`. INVALID_ARGUMENT naming the key for a value that is
// not an integer of T's range.
template <typename T>
absl::Status ReadInteger(const nlohmann::json& j, const char* key, bool required, T* out) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("trial spec: ", key, ": missing"));
  }
  if (!JsonToInteger(*it, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trial spec: ", key, ": expected an integer in range, got ", it->dump()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrialSpec> TrialSpecFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("trial spec: expected a JSON object");
  TrialSpec s;
  try {
    s.trial_id = j.value("trial_id", "");
    RETURN_IF_ERROR(ReadInteger(j, "attempt", /*required=*/false, &s.attempt));
    RETURN_IF_ERROR(ReadInteger(j, "rank", /*required=*/false, &s.rank));
    RETURN_IF_ERROR(ReadInteger(j, "world_size", /*required=*/false, &s.world_size));
    RETURN_IF_ERROR(ReadInteger(j, "local_rank", /*required=*/false, &s.local_rank));
    RETURN_IF_ERROR(ReadInteger(j, "local_world_size", /*required=*/false, &s.local_world_size));
    RETURN_IF_ERROR(ReadInteger(j, "group_rank", /*required=*/false, &s.group_rank));
    if (auto it = j.find("local_device_indices"); it != j.end()) {
      if (!it->is_array() || it->size() > kMaxLocalRanks) {
        return absl::InvalidArgumentError(
            absl::StrCat("trial spec: local_device_indices: expected an array of at most ",
                         kMaxLocalRanks, " device indices, got ", it->dump()));
      }
      for (const nlohmann::json& index : *it) {
        int value = 0;
        if (!JsonToInteger(index, &value) || value < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "trial spec: local_device_indices: expected device indices >= 0, got ", it->dump()));
        }
        s.local_device_indices.push_back(value);
      }
    }
    s.master_addr = j.value("master_addr", "127.0.0.1");
    RETURN_IF_ERROR(ReadInteger(j, "master_port", /*required=*/false, &s.master_port));
    RETURN_IF_ERROR(ReadInteger(j, "seq_len", /*required=*/true, &s.seq_len));
    RETURN_IF_ERROR(ReadInteger(j, "global_batch_size", /*required=*/true, &s.global_batch_size));
    RETURN_IF_ERROR(ReadInteger(j, "warmup_steps", /*required=*/false, &s.warmup_steps));
    RETURN_IF_ERROR(ReadInteger(j, "measured_steps", /*required=*/false, &s.measured_steps));
    s.min_measured_seconds = j.value("min_measured_seconds", 0.0);
    RETURN_IF_ERROR(
        ReadInteger(j, "memory_limit_bytes", /*required=*/false, &s.memory_limit_bytes));
    s.device = j.value("device", "cpu");
    RETURN_IF_ERROR(ReadInteger(j, "num_threads", /*required=*/false, &s.num_threads));
    RETURN_IF_ERROR(ReadInteger(j, "seed", /*required=*/false, &s.seed));
    s.model_file = j.value("model_file", "");
    RETURN_IF_ERROR(ReadInteger(j, "bucket_bytes", /*required=*/false, &s.bucket_bytes));
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
  const bool placed = !s.local_device_indices.empty();
  if (s.local_world_size < 1 || s.local_world_size > s.world_size || s.local_rank < 0 ||
      s.local_rank >= (placed ? s.local_world_size : s.world_size) || s.group_rank < 0 ||
      s.group_rank > s.rank ||
      (placed && static_cast<int>(s.local_device_indices.size()) != s.local_world_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trial spec: the rank's place on its worker is out of range (local_rank ", s.local_rank,
        ", local_world_size ", s.local_world_size, ", group_rank ", s.group_rank, ", ",
        s.local_device_indices.size(), " local_device_indices; rank ", s.rank, " of world_size ",
        s.world_size,
        "): 1 <= local_world_size <= world_size, 0 <= group_rank <= rank, and "
        "local_device_indices empty (0 <= local_rank < world_size) or one per local rank "
        "(0 <= local_rank < local_world_size)"));
  }
  return s;
}

}  // namespace autoaccel
