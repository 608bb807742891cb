// The metrics protocol of launcher trials: a user's script appends JSON
// lines to $AUTOACCEL_METRICS_FILE ({"event": "step", ...}, "oom", "model",
// "ready"; docs/LAUNCHERS.md), the worker reads them while the script runs
// and turns the measured steps into the rank's TrialMetrics.
#ifndef AUTOACCEL_WORKER_METRICS_FILE_H_
#define AUTOACCEL_WORKER_METRICS_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spec/trial.h"

namespace autoaccel {

// One optimizer step as the script reported it.
struct StepEvent {
  int64_t step = 0;
  double step_time_s = 0;
  std::optional<int64_t> tokens;   // the whole global batch's
  std::optional<int64_t> samples;  // likewise
  std::optional<double> loss;
  std::optional<int64_t> peak_memory_bytes;  // this rank's peak so far
};

// Everything the script has reported so far.
struct MetricsLog {
  std::vector<StepEvent> steps;
  std::optional<std::string> oom;  // the oom event's message ("" when it gave none)
  std::optional<int64_t> parameters;
  std::optional<double> ready_seconds;
  int lines = 0;  // lines read (the next line's number is lines + 1)
};

// Adds one line (without its newline) to `log` as line number
// log->lines + 1. An unknown event is ignored; a blank line too.
// INVALID_ARGUMENT "metrics file line N: <why>: <the line, at most 200
// chars>" for a line that is not a JSON object with a string "event", or a
// known event whose field is missing or mistyped: step needs an integer
// step >= 1 and a number step_time_s > 0, and its tokens, samples and
// peak_memory_bytes are integers >= 0, loss a number; oom's message a
// string; model's parameters an integer >= 1; ready's seconds a number >= 0.
// `log` is unchanged on error. Pure.
absl::Status AddMetricsLine(absl::string_view line, MetricsLog* log);

// Reads a metrics file as a script appends to it: each Poll reads what was
// appended since the last and adds its complete lines (a last line without
// its newline waits for it). One reader per file; not thread-safe.
class MetricsFileReader {
 public:
  explicit MetricsFileReader(std::string path) : path_(std::move(path)) {}

  // OK when nothing new or every new line was good (a file that does not
  // exist yet is empty). The first bad line's error (AddMetricsLine) is
  // returned by this and every later Poll; lines after it are not read. A
  // line longer than 1 MiB is an error too.
  absl::Status Poll();

  const MetricsLog& log() const { return log_; }

 private:
  std::string path_;
  int64_t offset_ = 0;   // bytes consumed
  std::string partial_;  // a line read without its newline yet
  MetricsLog log_;
  absl::Status error_;
};

// What RankMetrics needs beyond the log.
struct RankMetricsInput {
  int warmup_steps = 0;
  int measured_steps = 1;
  int world_size = 1;
  int global_batch_size = 1;
  int seq_len = 1;
  // Model FLOPs per trained token; 0 = unknown (then 6 x the model event's
  // parameters, if any).
  double flops_per_token = 0;
  // One device's dense peak at the trial's precision (TFLOP/s); 0 = unknown.
  double device_peak_tflops = 0;
  // The process tree's peak RSS the worker measured.
  int64_t peak_rss_bytes = 0;
};

// The rank's metrics from the measured steps: log.steps after the first
// warmup_steps, at most measured_steps of them. step_time median/min/max
// and spread ((p90 - p10) / median) as the engine computes them;
// tokens_per_second = median tokens / median step time (a step without
// tokens counts global_batch_size x seq_len; without samples,
// global_batch_size); final_loss the last reported loss; peak_memory_bytes
// the largest reported, else peak_rss_bytes; achieved_tflops = flops per
// token x tokens/s / 1e12; peak_tflops = device peak x world_size; mfu =
// achieved / peak (0 when unknown). Zero metrics when no step is measured.
// Pure.
TrialMetrics RankMetrics(const MetricsLog& log, const RankMetricsInput& in);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_METRICS_FILE_H_
