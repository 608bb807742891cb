#include "client/commands.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/untrusted_json.h"
#include "nlohmann/json.hpp"
#include "proto/convert.h"
#include "search/trial.h"

namespace autoaccel {
namespace {

using nlohmann::json;

constexpr auto kRpcTimeout = std::chrono::seconds(15);

void SetDeadline(grpc::ClientContext* ctx, std::chrono::seconds timeout = kRpcTimeout) {
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

// One clear line for a failed RPC.
int RpcError(const ClientContext& c, const grpc::Status& s) {
  std::string what;
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      what = absl::StrCat("cannot reach the autoaccel server at ", c.server, " (",
                          s.error_message(), ")");
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      what = absl::StrCat("the server at ", c.server, " did not answer in time");
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      what = absl::StrCat("invalid request: ", s.error_message());
      break;
    case grpc::StatusCode::NOT_FOUND:
      what = absl::StrCat("not found: ", s.error_message());
      break;
    default:
      what = absl::StrCat(s.error_message(), " (code ", static_cast<int>(s.error_code()), ")");
  }
  if (c.json) {
    *c.out << json{{"error", what}, {"code", static_cast<int>(s.error_code())}}.dump(2) << "\n";
  }
  *c.err << "autoaccel: " << what << "\n";
  return 1;
}

json StrategyJsonOf(const std::string& text) {
  absl::StatusOr<json> j = ParseUntrustedJson(text, "strategy_json");
  return j.ok() ? *j : json(nullptr);
}

json MetricsJson(const v1::TrialMetrics& m) { return TrialMetricsToJson(FromProto(m)); }

json TrialJson(const v1::Trial& t) {
  return json{
      {"trial_id", t.trial_id()},
      {"index", t.index()},
      {"attempt", t.attempt()},
      {"strategy", t.strategy().text()},
      {"strategy_json", StrategyJsonOf(t.strategy_json())},
      {"status", t.status()},
      {"reason", t.reason()},
      {"metrics", MetricsJson(t.metrics())},
      {"worker_ids", std::vector<std::string>(t.worker_ids().begin(), t.worker_ids().end())},
      {"started_at", t.started_at()},
      {"finished_at", t.finished_at()},
      {"failed_attempts",
       std::vector<std::string>(t.failed_attempts().begin(), t.failed_attempts().end())},
      {"infrastructure", t.infrastructure()},
      {"confirms", t.confirms()}};
}

// The job's request as the server validated it (defaults filled in; a
// torchscript file is never sent back), in the form the server stores.
json RequestJson(const v1::TuneRequest& r) {
  json j = json::parse(ProtoToJson(r), nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

json PrunedSummaryJson(const v1::Job& j) {
  json out = json::array();
  for (const v1::PrunedSummary& p : j.pruned_summary()) {
    out.push_back(
        {{"kind", p.kind()},
         {"count", p.count()},
         {"example",
          {{"strategy", p.example().strategy().text()}, {"reason", p.example().reason()}}}});
  }
  return out;
}

json JobJson(const v1::Job& j, const std::vector<v1::Trial>* trials) {
  json out{{"job_id", j.job_id()},
           {"state", j.state()},
           {"status_message", j.status_message()},
           {"signature", j.signature()},
           {"elapsed_seconds", j.elapsed_seconds()},
           {"created_at", j.created_at()},
           {"finished_at", j.finished_at()},
           {"time_limit_seconds", j.request().time_limit_seconds()},
           {"trials_total", j.trials_total()},
           {"trials_done", j.trials_done()},
           {"trials_running", j.trials_running()},
           {"trials_pruned", j.trials_pruned()},
           {"pruned_summary", PrunedSummaryJson(j)},
           {"algorithm", j.algorithm()},
           {"infrastructure_failures", j.infrastructure_failures()},
           {"trials_lost", j.trials_lost()},
           {"infrastructure_reasons", std::vector<std::string>(j.infrastructure_reasons().begin(),
                                                               j.infrastructure_reasons().end())},
           {"partial_evidence", j.partial_evidence()},
           {"model",
            {{"family", j.request().model().family()},
             {"seq_len", j.request().seq_len()},
             {"global_batch_size", j.request().global_batch_size()}}},
           {"request", RequestJson(j.request())}};
  if (j.has_best()) {
    out["best"] = json{{"trial_id", j.best().trial_id()},
                       {"strategy", j.best().strategy().text()},
                       {"strategy_json", StrategyJsonOf(j.best().strategy_json())},
                       {"metrics", MetricsJson(j.best().metrics())},
                       {"confirmed", j.best_confirmed()},
                       {"measurements", j.best_measurements()},
                       {"spread", j.best_spread()}};
  } else {
    out["best"] = nullptr;
  }
  if (trials != nullptr) {
    out["trials"] = json::array();
    for (const v1::Trial& t : *trials) out["trials"].push_back(TrialJson(t));
  }
  return out;
}

std::string Mib(int64_t bytes) { return absl::StrFormat("%.1f", bytes / (1024.0 * 1024.0)); }

// MFU as a percentage, or "-" when the device's peak is unknown.
std::string Mfu(double mfu) { return mfu > 0 ? absl::StrFormat("%.1f%%", 100 * mfu) : "-"; }

// The strategy column comes last: its canonical text varies in length (new
// dimensions add keys, ckpt_pct appears only when not 100), so fixed-width
// columns stay aligned only before it.
std::string TrialRow(const v1::Trial& t) {
  const v1::TrialMetrics& m = t.metrics();
  // A confirmation names the trial it measures again: "repeat of #3".
  std::string repeat;
  if (const size_t at = t.confirms().rfind("-t"); at != std::string::npos) {
    int index = 0;
    if (absl::SimpleAtoi(t.confirms().substr(at + 2), &index)) {
      repeat = absl::StrCat("  repeat of #", index);
    }
  }
  if (t.status() == "SUCCEEDED") {
    return absl::StrFormat("%4d  %-9s %10.0f %9.1f %7.1f %9s %6s %7.3f  %s%s%s", t.index(),
                           t.status(), m.tokens_per_second(), m.step_time_median_s() * 1000,
                           m.comm_time_s() * 1000, Mib(m.peak_memory_bytes()), Mfu(m.mfu()),
                           m.final_loss(), t.strategy().text(),
                           FromProto(m).IsNoisy() ? "  noisy" : "", repeat);
  }
  std::string reason = t.reason().substr(0, t.reason().find('\n'));
  if (reason.size() > 60) reason = reason.substr(0, 57) + "...";
  return absl::StrFormat("%4d  %-9s %10s %9s %7s %9s %6s %7s  %s%s", t.index(), t.status(), "-",
                         "-", "-", "-", "-", "-", t.strategy().text(),
                         reason.empty() ? "" : absl::StrCat("  (", reason, ")"));
}

std::string TableHeader() {
  return absl::StrFormat("%4s  %-9s %10s %9s %7s %9s %6s %7s  %s", "#", "status", "tokens/s",
                         "step ms", "comm ms", "peak MiB", "MFU", "loss", "strategy");
}

// PRUNED candidates can be tens of thousands: the table counts them by kind
// of reason, one line each with an example (`trials --include-pruned
// --json` lists each with its reason).
void PrintTrialTable(std::ostream& out, const std::vector<v1::Trial>& trials, const v1::Job& job) {
  out << TableHeader() << "\n";
  for (const v1::Trial& t : trials) {
    if (t.status() != "PRUNED") out << TrialRow(t) << "\n";
  }
  for (const v1::PrunedSummary& p : job.pruned_summary()) {
    out << absl::StrFormat("      %d candidate(s) PRUNED, %s; e.g. %s: %s\n", p.count(), p.kind(),
                           p.example().strategy().text(), p.example().reason());
  }
}

void PrintJobSummary(std::ostream& out, const v1::Job& j) {
  out << "job " << j.job_id() << ": " << j.state() << " — " << j.status_message() << "\n";
  out << absl::StrFormat(
      "  elapsed %.1fs of %.0fs limit; %d trial(s) run, %d candidate(s) pruned, of %d\n",
      j.elapsed_seconds(), j.request().time_limit_seconds(), j.trials_done() - j.trials_pruned(),
      j.trials_pruned(), j.trials_total());
  if (!j.algorithm().empty()) out << "  search: " << j.algorithm() << "\n";
  if (j.infrastructure_failures() > 0) {
    out << absl::StrFormat(
        "  %s: %d attempt(s) failed outside the strategy, %d trial(s) lost after every retry "
        "(%s)\n",
        j.partial_evidence() ? "WARNING, partial evidence" : "infrastructure",
        j.infrastructure_failures(), j.trials_lost(),
        absl::StrJoin(j.infrastructure_reasons(), "; "));
  }
  if (j.has_best()) {
    const v1::TrialMetrics& m = j.best().metrics();
    out << "  best strategy: " << j.best().strategy().text() << "\n";
    out << (j.best_confirmed()
                ? absl::StrFormat(
                      "    measured %d times, spread %.1f%% (figures below: the repeat)\n",
                      j.best_measurements(), 100 * j.best_spread())
                : std::string("    measured once (no time was left to measure it again)\n"));
    out << absl::StrFormat(
        "    %.0f tokens/s, %.1f samples/s, %.3f TFLOP/s%s, step %.1f ms, peak memory %s MiB, "
        "loss %.3f\n",
        m.tokens_per_second(), m.samples_per_second(), m.achieved_tflops(),
        m.mfu() > 0
            ? absl::StrFormat(" (MFU %s of %.3g TFLOP/s peak)", Mfu(m.mfu()), m.peak_tflops())
            : "",
        m.step_time_median_s() * 1000, Mib(m.peak_memory_bytes()), m.final_loss());
    if (m.skipped_steps() > 0) {
      out << absl::StrFormat(
          "    note: %d of %d measured fp16 steps skipped their update (gradient overflow), so "
          "the step time is optimistic\n",
          m.skipped_steps(), m.measured_steps());
    }
  }
}

std::string ProgressLine(const v1::Job& j) {
  const double limit = j.request().time_limit_seconds();
  const double frac = limit > 0 ? std::min(1.0, j.elapsed_seconds() / limit) : 0;
  const int width = 24;
  const int filled = static_cast<int>(std::round(frac * width));
  std::string bar = std::string(filled, '#') + std::string(width - filled, '-');
  std::string best =
      j.has_best() ? absl::StrFormat("best %.0f tok/s", j.best().metrics().tokens_per_second())
                   : "no result yet";
  // What the job will settle at most: the space, or the trial budget (pruned
  // candidates do not count against it) if smaller.
  int planned = j.trials_total();
  if (j.request().max_trials() > 0) {
    planned = std::min(planned, j.request().max_trials() + j.trials_pruned());
  }
  return absl::StrFormat("[%s] %5.0fs/%.0fs  %s  trials %d/%d done (%d pruned), %d running  %s",
                         bar, j.elapsed_seconds(), limit, j.state(), j.trials_done(), planned,
                         j.trials_pruned(), j.trials_running(), best);
}

bool IsTerminalState(const std::string& s) {
  return s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLED";
}

// Streams the job, printing each finished trial as a table row and a
// progress line; returns the last snapshot seen, or an error status.
grpc::Status Watch(const ClientContext& c, const std::string& job_id, v1::JobEvent* last) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(48));
  v1::WatchJobRequest req;
  req.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>> reader = c.stub->WatchJob(&ctx, req);
  std::set<std::string> shown;
  std::string last_state, last_line, last_algorithm;
  std::map<std::string, int> pruned_shown;  // by kind
  bool header = false;
  v1::JobEvent event;
  while (reader->Read(&event)) {
    const v1::Job& j = event.job();
    if (c.interactive) *c.err << "\r\033[K";
    if (!j.algorithm().empty() && j.algorithm() != last_algorithm) {
      *c.err << "search: " << j.algorithm() << "\n";
      last_algorithm = j.algorithm();
    }
    // Pruned candidates: one line per kind as the count grows, never one per
    // candidate (the job's summary counts them).
    for (const v1::PrunedSummary& p : j.pruned_summary()) {
      int& seen = pruned_shown[p.kind()];
      if (p.count() == seen) continue;
      *c.err << absl::StrFormat(
          "pruned %d candidate(s), %s (%d of that kind in all), e.g. %s: %s\n", p.count() - seen,
          p.kind(), p.count(), p.example().strategy().text(), p.example().reason());
      seen = p.count();
    }
    for (const v1::Trial& t : event.trials()) {
      if (t.status() == "RUNNING" || t.status() == "PENDING" || t.status() == "PRUNED" ||
          shown.count(t.trial_id())) {
        continue;
      }
      if (!header) {
        *c.err << TableHeader() << "\n";
        header = true;
      }
      *c.err << TrialRow(t) << "\n";
      shown.insert(t.trial_id());
    }
    if (j.state() != last_state) {
      *c.err << "job " << j.job_id() << ": " << j.state() << " — " << j.status_message() << "\n";
      last_state = j.state();
    }
    std::string line = ProgressLine(j);
    if (c.interactive) {
      *c.err << line << std::flush;
    } else {
      // Not a terminal: a progress line only when more than the clock moved.
      std::string key = absl::StrCat(j.state(), "/", j.trials_done(), "/", j.trials_running());
      if (key != last_line) *c.err << line << "\n";
      last_line = key;
    }
    *last = event;
    if (IsTerminalState(j.state())) break;
  }
  if (c.interactive) *c.err << "\n";
  return reader->Finish();
}

int PrintFinishedJob(const ClientContext& c, const v1::Job& job,
                     const std::vector<v1::Trial>& trials) {
  if (c.json) {
    *c.out << JobJson(job, &trials).dump(2) << "\n";
  } else {
    PrintJobSummary(*c.out, job);
  }
  if (job.state() != "SUCCEEDED") return 1;
  return job.partial_evidence() ? kExitPartialEvidence : 0;
}

// Every trial of the job, page by page (pruned candidates only when asked).
grpc::Status FetchTrials(const ClientContext& c, const std::string& job_id, bool include_pruned,
                         std::vector<v1::Trial>* trials) {
  trials->clear();
  v1::ListTrialsRequest req;
  req.set_job_id(job_id);
  req.set_include_pruned(include_pruned);
  do {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::ListTrialsResponse resp;
    grpc::Status s = c.stub->ListTrials(&ctx, req, &resp);
    if (!s.ok()) return s;
    trials->insert(trials->end(), resp.trials().begin(), resp.trials().end());
    req.set_page_token(resp.next_page_token());
  } while (!req.page_token().empty());
  return grpc::Status::OK;
}

}  // namespace

int TuneCommand(const ClientContext& c, const v1::TuneRequest& request, bool watch) {
  v1::Job job;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::SubmitJobRequest req;
    *req.mutable_request() = request;
    grpc::Status s = c.stub->SubmitJob(&ctx, req, &job);
    if (!s.ok()) return RpcError(c, s);
  }
  *c.err << "submitted job " << job.job_id() << " (" << job.trials_total()
         << " candidate strategies, time limit " << request.time_limit_seconds() << "s)\n";
  if (!watch) {
    if (c.json) {
      *c.out << JobJson(job, nullptr).dump(2) << "\n";
    } else {
      *c.out << job.job_id() << "\n";
    }
    return 0;
  }
  *c.err << "watching; Ctrl-C detaches (the job keeps running; `autoaccel cancel " << job.job_id()
         << "` stops it)\n";
  return WatchCommand(c, job.job_id());
}

int WatchCommand(const ClientContext& c, const std::string& job_id) {
  v1::JobEvent last;
  grpc::Status s = Watch(c, job_id, &last);
  if (!s.ok()) return RpcError(c, s);
  std::vector<v1::Trial> trials;
  // The stream's last event already holds every trial; re-read so the output
  // reflects exactly what the database recorded.
  if (grpc::Status ls = FetchTrials(c, job_id, /*include_pruned=*/false, &trials); !ls.ok()) {
    return RpcError(c, ls);
  }
  v1::Job job;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    if (grpc::Status gs = c.stub->GetJob(&ctx, req, &job); !gs.ok()) return RpcError(c, gs);
  }
  if (!c.json) {
    // The rows went to stderr as they finished; repeat them on stdout unless
    // stdout is that same stream (2>&1), where they would show twice.
    if (!c.out_is_err) {
      *c.out << "\n";
      PrintTrialTable(*c.out, trials, job);
    }
    *c.out << "\n";
  }
  return PrintFinishedJob(c, job, trials);
}

int JobsCommand(const ClientContext& c, int limit) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ListJobsRequest req;
  req.set_limit(limit);
  v1::ListJobsResponse resp;
  if (grpc::Status s = c.stub->ListJobs(&ctx, req, &resp); !s.ok()) return RpcError(c, s);
  if (c.json) {
    json out = json::array();
    for (const v1::Job& j : resp.jobs()) out.push_back(JobJson(j, nullptr));
    *c.out << json{{"jobs", out}}.dump(2) << "\n";
    return 0;
  }
  *c.out << absl::StrFormat("%-28s %-20s %8s %7s  %s\n", "job", "state", "elapsed", "trials",
                            "best");
  for (const v1::Job& j : resp.jobs()) {
    *c.out << absl::StrFormat("%-28s %-20s %7.0fs %3d/%-3d  %s\n", j.job_id(), j.state(),
                              j.elapsed_seconds(), j.trials_done(), j.trials_total(),
                              j.has_best() ? j.best().strategy().text() : "-");
  }
  return 0;
}

int JobCommand(const ClientContext& c, const std::string& job_id) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  v1::Job job;
  if (grpc::Status s = c.stub->GetJob(&ctx, req, &job); !s.ok()) return RpcError(c, s);
  if (c.json) {
    *c.out << JobJson(job, nullptr).dump(2) << "\n";
  } else {
    PrintJobSummary(*c.out, job);
  }
  return 0;
}

int TrialsCommand(const ClientContext& c, const std::string& job_id, bool include_pruned) {
  std::vector<v1::Trial> trials;
  if (grpc::Status s = FetchTrials(c, job_id, include_pruned, &trials); !s.ok()) {
    return RpcError(c, s);
  }
  v1::Job job;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    if (grpc::Status s = c.stub->GetJob(&ctx, req, &job); !s.ok()) return RpcError(c, s);
  }
  if (c.json) {
    json out = json::array();
    for (const v1::Trial& t : trials) out.push_back(TrialJson(t));
    *c.out << json{{"job_id", job_id}, {"trials", out}, {"pruned_summary", PrunedSummaryJson(job)}}
                  .dump(2)
           << "\n";
  } else {
    PrintTrialTable(*c.out, trials, job);
  }
  return 0;
}

int BestCommand(const ClientContext& c, const v1::QueryStrategiesRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::QueryStrategiesResponse resp;
  if (grpc::Status s = c.stub->QueryStrategies(&ctx, request, &resp); !s.ok()) {
    return RpcError(c, s);
  }
  if (resp.answers().empty()) {
    const std::string what =
        absl::StrCat("no strategy recorded for this ", request.model().family(),
                     " model, sequence length and batch size");
    if (c.json) *c.out << json{{"best", nullptr}, {"error", what}}.dump(2) << "\n";
    *c.err << "autoaccel: " << what << "\n";
    return 3;
  }
  const v1::StrategyAnswer& a = resp.answers(0);
  if (c.json) {
    *c.out << json{{"signature", a.signature()},
                   {"hardware", a.hardware()},
                   {"job_id", a.job_id()},
                   {"updated_at", a.updated_at()},
                   {"best",
                    {{"strategy", a.strategy().text()},
                     {"strategy_json", StrategyJsonOf(a.strategy_json())},
                     {"metrics", MetricsJson(a.metrics())}}}}
                  .dump(2)
           << "\n";
  } else {
    *c.out << "best strategy: " << a.strategy().text() << "\n"
           << absl::StrFormat(
                  "  %.0f tokens/s%s, peak memory %s MiB on %s (found by job %s)\n",
                  a.metrics().tokens_per_second(),
                  a.metrics().mfu() > 0 ? absl::StrCat(", MFU ", Mfu(a.metrics().mfu())) : "",
                  Mib(a.metrics().peak_memory_bytes()), a.hardware(), a.job_id());
  }
  return 0;
}

int WorkersCommand(const ClientContext& c) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ListWorkersResponse resp;
  if (grpc::Status s = c.stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp); !s.ok()) {
    return RpcError(c, s);
  }
  if (c.json) {
    json out = json::array();
    for (const v1::Worker& w : resp.workers()) {
      json devices = json::array();
      for (const v1::Device& d : w.devices()) {
        devices.push_back({{"type", d.type()},
                           {"index", d.index()},
                           {"name", d.name()},
                           {"memory_bytes", d.memory_bytes()},
                           {"peak_tflops",
                            {{"fp32", d.peak_tflops().fp32()},
                             {"bf16", d.peak_tflops().bf16()},
                             {"fp16", d.peak_tflops().fp16()}}},
                           {"held_by_trial", d.held_by_trial()}});
      }
      out.push_back(
          {{"worker_id", w.worker_id()},
           {"address", w.address()},
           {"healthy", w.healthy()},
           {"last_seen", w.last_seen()},
           {"registered_at", w.registered_at()},
           {"rendezvous_ports",
            {{"min", w.rendezvous_port_min()}, {"max", w.rendezvous_port_max()}}},
           {"host_cpu_cores", w.host_cpu_cores()},
           {"host_memory_bytes", w.host_memory_bytes()},
           {"warnings", std::vector<std::string>(w.warnings().begin(), w.warnings().end())},
           {"devices", devices}});
    }
    *c.out << json{{"workers", out}}.dump(2) << "\n";
    return 0;
  }
  if (resp.workers().empty()) *c.out << "no workers registered\n";
  for (const v1::Worker& w : resp.workers()) {
    *c.out << w.worker_id() << " at " << w.address() << (w.healthy() ? "" : " (LOST)");
    if (w.rendezvous_port_max() > 0) {
      *c.out << "  rendezvous ports " << w.rendezvous_port_min() << "-" << w.rendezvous_port_max();
    }
    *c.out << "\n";
    for (const std::string& warning : w.warnings()) *c.out << "  warning: " << warning << "\n";
    for (const v1::Device& d : w.devices()) {
      const v1::PeakTflops& peak = d.peak_tflops();
      const std::string peak_text =
          peak.fp32() == 0 && peak.bf16() == 0 && peak.fp16() == 0
              ? "peak unknown"
              : absl::StrFormat("peak TFLOP/s bf16 %.4g fp16 %.4g fp32 %.4g", peak.bf16(),
                                peak.fp16(), peak.fp32());
      *c.out << absl::StrFormat(
          "  %s:%d  %s  %s MiB  %s  %s\n", d.type(), d.index(), d.name(), Mib(d.memory_bytes()),
          peak_text, d.held_by_trial().empty() ? "free" : "running " + d.held_by_trial());
    }
  }
  return 0;
}

int CancelCommand(const ClientContext& c, const std::string& job_id) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::CancelJobRequest req;
  req.set_job_id(job_id);
  v1::Job job;
  if (grpc::Status s = c.stub->CancelJob(&ctx, req, &job); !s.ok()) return RpcError(c, s);
  if (c.json) {
    *c.out << JobJson(job, nullptr).dump(2) << "\n";
  } else {
    PrintJobSummary(*c.out, job);
  }
  return 0;
}

}  // namespace autoaccel
