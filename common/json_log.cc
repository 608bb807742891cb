#include "common/json_log.h"

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace autoaccel {
namespace {

thread_local const LogContext* current_context = nullptr;
// Set once by SetLogFormat, before other threads log.
bool json_logs = false;

class JsonFormatter : public spdlog::formatter {
 public:
  JsonFormatter(std::string process, std::string insecure_why)
      : process_(std::move(process)), insecure_why_(std::move(insecure_why)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;  // fields in the order written
    line["time"] =
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromChrono(msg.time), absl::UTCTimeZone());
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    line["process"] = process_;
    line["message"] = std::string(msg.payload.data(), msg.payload.size());
    if (const LogContext* c = current_context; c != nullptr) {
      if (!c->job_id().empty()) line["job_id"] = c->job_id();
      if (!c->trial_id().empty()) line["trial_id"] = c->trial_id();
      if (c->rank() >= 0) line["rank"] = c->rank();
    }
    if (!insecure_why_.empty()) line["insecure"] = insecure_why_;
    // Invalid UTF-8 in a message (a worker's id, a trial's output) is
    // replaced, never a reason to lose the line.
    const std::string text = absl::StrCat(
        line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), "\n");
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(process_, insecure_why_);
  }

 private:
  const std::string process_;
  const std::string insecure_why_;
};

}  // namespace

absl::Status SetLogFormat(const std::string& format, const std::string& process,
                          const std::string& insecure_why) {
  if (format == "text") return absl::OkStatus();
  if (format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format: '", format, "' is not one of text, json"));
  }
  spdlog::set_formatter(std::make_unique<JsonFormatter>(process, insecure_why));
  json_logs = true;
  return absl::OkStatus();
}

void Announce(const std::string& line) {
  if (json_logs) {
    spdlog::info("{}", line);
    spdlog::default_logger()->flush();
    return;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

LogContext::LogContext(std::string job_id, std::string trial_id, int rank)
    : job_id_(std::move(job_id)),
      trial_id_(std::move(trial_id)),
      rank_(rank),
      enclosing_(current_context) {
  current_context = this;
}

LogContext::~LogContext() { current_context = enclosing_; }

}  // namespace autoaccel
