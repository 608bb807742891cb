#include "proto/convert.h"

#include <google/protobuf/util/json_util.h>

#include "common/status_macros.h"

namespace autoaccel {

v1::Strategy ToProto(const Strategy& s) {
  v1::Strategy p;
  p.set_micro_batch_size(s.micro_batch_size);
  p.set_grad_accum_steps(s.grad_accum_steps);
  p.set_precision(std::string(PrecisionName(s.precision)));
  p.set_checkpointing(std::string(CheckpointingName(s.checkpointing)));
  p.set_attention(std::string(AttentionName(s.attention)));
  p.set_checkpoint_percent(s.checkpoint_percent);
  p.set_optimizer(std::string(OptimizerName(s.optimizer)));
  p.set_offload(std::string(OffloadName(s.offload)));
  p.set_data_parallel(s.data_parallel);
  p.set_tensor_parallel(s.tensor_parallel);
  p.set_pipeline_parallel(s.pipeline_parallel);
  p.set_sharding(std::string(ShardingName(s.sharding)));
  p.set_pipeline_schedule(std::string(PipelineScheduleName(s.pipeline_schedule)));
  p.set_virtual_stages(s.virtual_stages);
  p.set_sequence_parallel(s.sequence_parallel);
  p.set_text(StrategyToText(s));
  return p;
}

absl::StatusOr<Strategy> FromProto(const v1::Strategy& p) {
  Strategy s;
  s.micro_batch_size = p.micro_batch_size();
  s.grad_accum_steps = p.grad_accum_steps();
  if (s.micro_batch_size <= 0 || s.grad_accum_steps <= 0) {
    return absl::InvalidArgumentError(
        "strategy: micro_batch_size and grad_accum_steps must be positive");
  }
  ASSIGN_OR_RETURN(s.precision, ParsePrecision(p.precision()));
  ASSIGN_OR_RETURN(s.checkpointing, ParseCheckpointing(p.checkpointing()));
  ASSIGN_OR_RETURN(s.attention, ParseAttention(p.attention()));
  s.checkpoint_percent = p.checkpoint_percent() == 0 ? 100 : p.checkpoint_percent();
  RETURN_IF_ERROR(CheckCheckpointPercent(s));
  if (!p.optimizer().empty()) {
    ASSIGN_OR_RETURN(s.optimizer, ParseOptimizer(p.optimizer()));
  }
  if (!p.offload().empty()) {
    ASSIGN_OR_RETURN(s.offload, ParseOffload(p.offload()));
  }
  // Unset (0, "") means the single-rank default, so requests written before
  // the layout fields existed still convert.
  const auto degree = [](int32_t v) { return v == 0 ? 1 : v; };
  s.data_parallel = degree(p.data_parallel());
  s.tensor_parallel = degree(p.tensor_parallel());
  s.pipeline_parallel = degree(p.pipeline_parallel());
  s.virtual_stages = degree(p.virtual_stages());
  if (!p.sharding().empty()) {
    ASSIGN_OR_RETURN(s.sharding, ParseSharding(p.sharding()));
  }
  if (!p.pipeline_schedule().empty()) {
    ASSIGN_OR_RETURN(s.pipeline_schedule, ParsePipelineSchedule(p.pipeline_schedule()));
  }
  s.sequence_parallel = p.sequence_parallel();
  RETURN_IF_ERROR(CheckLayout(s));
  return s;
}

v1::TrialMetrics ToProto(const TrialMetrics& m) {
  v1::TrialMetrics p;
  p.set_measured_steps(m.measured_steps);
  p.set_step_time_median_s(m.step_time_median_s);
  p.set_step_time_min_s(m.step_time_min_s);
  p.set_step_time_max_s(m.step_time_max_s);
  p.set_step_time_spread(m.step_time_spread);
  p.set_tokens_per_second(m.tokens_per_second);
  p.set_samples_per_second(m.samples_per_second);
  p.set_achieved_tflops(m.achieved_tflops);
  p.set_peak_memory_bytes(m.peak_memory_bytes);
  p.set_peak_rss_bytes(m.peak_rss_bytes);
  p.set_final_loss(m.final_loss);
  p.set_mfu(m.mfu);
  p.set_peak_tflops(m.peak_tflops);
  p.set_skipped_steps(m.skipped_steps);
  p.set_comm_time_s(m.comm_time_s);
  p.set_state_memory_bytes(m.state_memory_bytes);
  for (int64_t bytes : m.rank_peak_memory_bytes) p.add_rank_peak_memory_bytes(bytes);
  return p;
}

TrialMetrics FromProto(const v1::TrialMetrics& p) {
  TrialMetrics m;
  m.measured_steps = p.measured_steps();
  m.step_time_median_s = p.step_time_median_s();
  m.step_time_min_s = p.step_time_min_s();
  m.step_time_max_s = p.step_time_max_s();
  m.step_time_spread = p.step_time_spread();
  m.tokens_per_second = p.tokens_per_second();
  m.samples_per_second = p.samples_per_second();
  m.achieved_tflops = p.achieved_tflops();
  m.peak_memory_bytes = p.peak_memory_bytes();
  m.peak_rss_bytes = p.peak_rss_bytes();
  m.final_loss = p.final_loss();
  m.mfu = p.mfu();
  m.peak_tflops = p.peak_tflops();
  m.skipped_steps = p.skipped_steps();
  m.comm_time_s = p.comm_time_s();
  m.state_memory_bytes = p.state_memory_bytes();
  m.rank_peak_memory_bytes.assign(p.rank_peak_memory_bytes().begin(),
                                  p.rank_peak_memory_bytes().end());
  return m;
}

v1::PeakTflops ToProto(const PeakTflops& peak) {
  v1::PeakTflops p;
  p.set_fp32(peak.fp32);
  p.set_bf16(peak.bf16);
  p.set_fp16(peak.fp16);
  return p;
}

PeakTflops FromProto(const v1::PeakTflops& p) {
  PeakTflops peak;
  peak.fp32 = p.fp32();
  peak.bf16 = p.bf16();
  peak.fp16 = p.fp16();
  return peak;
}

double UnixSecondsOrZero(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return 0;
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

std::string ProtoToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Fails only on a message that could not be serialised at all (invalid
  // UTF-8 in a string field); proto3 parsing already refuses those.
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

}  // namespace autoaccel
