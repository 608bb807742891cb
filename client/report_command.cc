#include "client/report_command.h"

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/render.h"
#include "common/training_cost.h"
#include "report/report_html.h"

namespace autoaccel {
namespace {

// The memory line's figure from the registered workers, or a note saying
// why there is none.
DeviceMemory FetchDeviceMemory(const ClientContext& c, const std::vector<v1::Trial>& trials,
                               const std::string& device_type) {
  v1::ListWorkersResponse workers;
  grpc::Status s = ListAllWorkers(c, &workers);
  if (!s.ok())
    return {0, absl::StrCat("the server did not list its workers (", s.error_message(), ")")};
  return JobDeviceMemory(workers, trials, device_type);
}

// Writes `text` to `path` through a temporary file and a rename, so a reader
// never sees half a report. False with `error` set if it cannot.
bool WriteWhole(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      *error = absl::StrCat("cannot write ", tmp);
      return false;
    }
    out << text;
    out.close();
    if (!out) {
      *error = absl::StrCat("cannot write ", tmp, " (disk full?)");
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = absl::StrCat("cannot rename ", tmp, " to ", path);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

CLI::App* AddReportCommand(CLI::App* app, ReportFlags* f) {
  CLI::App* report = app->add_subcommand(
      "report", "write a job's report as one self-contained HTML file (charts, every trial)");
  report->add_option("job_id", f->job_id, "job id")->required();
  report->add_option("--html", f->html, "the HTML file to write (replaced)")->required();
  report->add_option("--tokens", f->tokens,
                     "tokens to train on (K, M, B, T suffixes: 1T = 1e12): the answer says the "
                     "days to train them at the job's world size");
  report->add_option("--price-per-gpu-hour", f->price_per_gpu_hour,
                     "with --tokens, the price of one device for an hour: adds the cost");
  return report;
}

int ReportCommand(const ClientContext& c, const ReportFlags& f) {
  const std::string& job_id = f.job_id;
  const std::string& html_path = f.html;
  ReportInput in;
  if (!f.tokens.empty()) {
    absl::StatusOr<int64_t> tokens = ParseTokenCount("--tokens", f.tokens);
    if (!tokens.ok()) {
      *c.err << "autoaccel: report: " << tokens.status().message() << "\n";
      return kExitBadInput;
    }
    in.tokens = *tokens;
  }
  if (!(f.price_per_gpu_hour >= 0) || !std::isfinite(f.price_per_gpu_hour) ||
      (f.price_per_gpu_hour > 0 && in.tokens == 0)) {
    *c.err << "autoaccel: report: --price-per-gpu-hour: a number > 0, with --tokens\n";
    return kExitBadInput;
  }
  in.price_per_gpu_hour = f.price_per_gpu_hour;
  if (grpc::Status s = FetchJob(c, job_id, &in.job); !s.ok()) return RpcError(c, s);
  if (grpc::Status s = FetchTrials(c, job_id, /*include_pruned=*/false, &in.trials); !s.ok()) {
    return RpcError(c, s);
  }
  in.device_memory = FetchDeviceMemory(c, in.trials, in.job.request().device_type());
  in.generated_at = absl::ToUnixSeconds(absl::Now());
  const std::string html = ReportHtml(in);
  std::string error;
  if (!WriteWhole(html_path, html, &error)) {
    if (c.json) WriteJson(*c.out, {{"error", error}});
    *c.err << "autoaccel: report: " << error << "\n";
    return 1;
  }
  if (c.json) {
    WriteJson(*c.out, {{"job_id", job_id},
                       {"html", html_path},
                       {"bytes", html.size()},
                       {"trials", in.trials.size()}});
  } else {
    *c.out << "wrote the report of job " << job_id << " (" << in.trials.size() << " trials) to "
           << html_path << "\n";
  }
  return 0;
}

}  // namespace autoaccel
