#include "worker/metrics_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/untrusted_json.h"
#include "spec/step_statistics.h"

namespace autoaccel {
namespace {

constexpr size_t kMaxLineBytes = 1 << 20;
constexpr size_t kQuotedLineChars = 200;

// Reads the fields of one event, remembering the first problem.
class EventReader {
 public:
  explicit EventReader(const nlohmann::json& j) : j_(j) {}

  // An integer >= min; nullopt when absent and optional (or on error).
  std::optional<int64_t> Int(const char* key, int64_t min, bool required) {
    if (!j_.contains(key) || (!required && j_[key].is_null())) {
      if (required) Fail(absl::StrCat("\"", key, "\" missing (an integer >= ", min, ")"));
      return std::nullopt;
    }
    const nlohmann::json& v = j_[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) ||
        v.get<int64_t>() < min) {
      Fail(absl::StrCat("\"", key, "\" must be an integer >= ", min));
      return std::nullopt;
    }
    return v.get<int64_t>();
  }

  // A finite number; `positive`: > 0, else >= 0 when `non_negative`.
  std::optional<double> Number(const char* key, bool required, bool positive, bool non_negative) {
    if (!j_.contains(key) || (!required && j_[key].is_null())) {
      if (required) Fail(absl::StrCat("\"", key, "\" missing (a number)"));
      return std::nullopt;
    }
    const nlohmann::json& v = j_[key];
    const double d = v.is_number() ? v.get<double>() : NAN;
    if (!std::isfinite(d) || (positive && !(d > 0)) || (non_negative && d < 0)) {
      Fail(absl::StrCat("\"", key, "\" must be a ",
                        positive       ? "number > 0"
                        : non_negative ? "number >= 0"
                                       : "finite number"));
      return std::nullopt;
    }
    return d;
  }

  std::optional<std::string> String(const char* key) {
    if (!j_.contains(key) || j_[key].is_null()) return std::nullopt;
    if (!j_[key].is_string()) {
      Fail(absl::StrCat("\"", key, "\" must be a string"));
      return std::nullopt;
    }
    return j_[key].get<std::string>();
  }

  const std::string& error() const { return error_; }

 private:
  void Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  const nlohmann::json& j_;
  std::string error_;
};

}  // namespace

absl::Status AddMetricsLine(absl::string_view line, MetricsLog* log) {
  const int number = log->lines + 1;
  auto bad = [&](absl::string_view why) {
    std::string quoted(line.substr(0, kQuotedLineChars));
    if (line.size() > kQuotedLineChars) quoted += "...";
    return absl::InvalidArgumentError(
        absl::StrCat("metrics file line ", number, ": ", why, ": ", quoted));
  };
  if (absl::StripAsciiWhitespace(line).empty()) {
    log->lines = number;
    return absl::OkStatus();
  }
  absl::StatusOr<nlohmann::json> parsed = ParseUntrustedJson(line, "line");
  if (!parsed.ok()) return bad("not JSON");
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("event") || !j["event"].is_string()) {
    return bad("no string \"event\" (step, oom, model or ready)");
  }
  const std::string event = j["event"].get<std::string>();
  EventReader r(j);
  MetricsLog next = *log;
  if (event == "step") {
    StepEvent step;
    step.step = r.Int("step", 1, true).value_or(0);
    step.step_time_s = r.Number("step_time_s", true, true, false).value_or(0);
    step.tokens = r.Int("tokens", 0, false);
    step.samples = r.Int("samples", 0, false);
    step.loss = r.Number("loss", false, false, false);
    step.peak_memory_bytes = r.Int("peak_memory_bytes", 0, false);
    next.steps.push_back(step);
  } else if (event == "oom") {
    next.oom = r.String("message").value_or("");
  } else if (event == "model") {
    next.parameters = r.Int("parameters", 1, true);
  } else if (event == "ready") {
    next.ready_seconds = r.Number("seconds", true, false, true);
  }  // else: an event of a newer script; ignored
  if (!r.error().empty()) return bad(absl::StrCat(event, " event: ", r.error()));
  next.lines = number;
  *log = std::move(next);
  return absl::OkStatus();
}

absl::Status MetricsFileReader::Poll() {
  if (!error_.ok()) return error_;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return absl::OkStatus();  // not written yet
  in.seekg(offset_);
  std::string chunk(64 * 1024, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    offset_ += got;
    for (std::streamsize i = 0; i < got; ++i) {
      const char c = chunk[static_cast<size_t>(i)];
      if (c != '\n') {
        partial_.push_back(c);
        if (partial_.size() > kMaxLineBytes) {
          error_ = absl::InvalidArgumentError(
              absl::StrCat("metrics file line ", log_.lines + 1,
                           ": longer than 1 MiB: ", partial_.substr(0, kQuotedLineChars), "..."));
          return error_;
        }
        continue;
      }
      if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
      absl::Status s = AddMetricsLine(partial_, &log_);
      partial_.clear();
      if (!s.ok()) {
        error_ = s;
        return error_;
      }
    }
  }
  return absl::OkStatus();
}

TrialMetrics RankMetrics(const MetricsLog& log, const RankMetricsInput& in) {
  TrialMetrics m;
  m.peak_rss_bytes = in.peak_rss_bytes;
  int64_t reported_peak = 0;
  for (const StepEvent& s : log.steps)
    reported_peak = std::max(reported_peak, s.peak_memory_bytes.value_or(0));
  m.peak_memory_bytes = reported_peak > 0 ? reported_peak : in.peak_rss_bytes;
  m.peak_tflops = in.device_peak_tflops * in.world_size;

  const size_t first = static_cast<size_t>(std::max(0, in.warmup_steps));
  if (log.steps.size() <= first) return m;
  const size_t last =
      std::min(log.steps.size(), first + static_cast<size_t>(std::max(1, in.measured_steps)));
  std::vector<double> times, tokens, samples;
  for (size_t i = first; i < last; ++i) {
    const StepEvent& s = log.steps[i];
    times.push_back(s.step_time_s);
    tokens.push_back(
        static_cast<double>(s.tokens.value_or(int64_t{in.global_batch_size} * in.seq_len)));
    samples.push_back(static_cast<double>(s.samples.value_or(in.global_batch_size)));
  }
  for (const StepEvent& s : log.steps) {
    if (s.loss) m.final_loss = *s.loss;
  }
  SetStepTimeFigures(times, &m);
  if (m.step_time_median_s > 0) {
    m.tokens_per_second = Median(tokens) / m.step_time_median_s;
    m.samples_per_second = Median(samples) / m.step_time_median_s;
  }
  const double flops_per_token = in.flops_per_token > 0
                                     ? in.flops_per_token
                                     : 6.0 * static_cast<double>(log.parameters.value_or(0));
  m.achieved_tflops = flops_per_token * m.tokens_per_second / 1e12;
  if (m.peak_tflops > 0) m.mfu = m.achieved_tflops / m.peak_tflops;
  return m;
}

}  // namespace autoaccel
