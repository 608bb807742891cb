#include "client/commands.h"

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/render.h"
#include "client/strategy_render.h"
#include "client/watch_retry.h"
#include "common/job_state.h"
#include "proto/convert.h"
#include "spec/trial.h"

namespace autoaccel {
namespace {

using Stub = v1::TuningService::StubInterface;

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

}  // namespace

int RpcError(const ClientContext& c, const grpc::Status& s) {
  std::string what;
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      what = absl::StrCat("cannot reach the autoaccel server at ", c.server, " (",
                          s.error_message(), ")");
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      what = absl::StrCat("the server at ", c.server, " did not answer in time");
      // gRPC's own deadline says only that; ours say more (a watch that lost
      // the coordinator, client/watch_retry.h).
      if (!s.error_message().empty() && s.error_message() != "Deadline Exceeded") {
        absl::StrAppend(&what, ": ", s.error_message());
      }
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      what = absl::StrCat("invalid request: ", s.error_message());
      break;
    case grpc::StatusCode::NOT_FOUND:
      what = absl::StrCat("not found: ", s.error_message());
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      what = absl::StrCat("not authenticated: ", s.error_message());
      break;
    case grpc::StatusCode::PERMISSION_DENIED:
      what = absl::StrCat("permission denied: ", s.error_message());
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      // A bound of the request (the message names the field and the bound),
      // a per-user limit, or the coordinator's full disk: the message says.
      what = absl::StrCat("refused: ", s.error_message());
      break;
    default:
      what = absl::StrCat(s.error_message(), " (code ", static_cast<int>(s.error_code()), ")");
  }
  if (c.json) WriteJson(*c.out, ErrorJson(what, static_cast<int>(s.error_code())));
  *c.err << "autoaccel: " << what << "\n";
  return 1;
}

namespace {

// What Watch has shown of the job, kept across reconnects so that no row
// or line shows twice.
struct WatchShown {
  std::set<std::string> trials;
  std::string state, line, algorithm;
  std::map<std::string, int> pruned;  // by kind
  bool header = false;
  bool terminal = false;  // the last event was the job's end
};

// One stream of the job until `deadline`: prints each finished trial as a
// table row and a progress line (what `view` has not shown yet), calls
// `delivered` for each event; returns the stream's status.
grpc::Status WatchStream(const ClientContext& c, const std::string& job_id, absl::Time deadline,
                         WatchShown* view, const std::function<void()>& delivered,
                         v1::JobEvent* last) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  v1::WatchJobRequest req;
  req.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>> reader = c.stub->WatchJob(&ctx, req);
  std::set<std::string>& shown = view->trials;
  std::string &last_state = view->state, &last_line = view->line, &last_algorithm = view->algorithm;
  std::map<std::string, int>& pruned_shown = view->pruned;
  bool& header = view->header;
  v1::JobEvent event;
  while (reader->Read(&event)) {
    delivered();
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
      *c.err << PrunedProgressLine(p, p.count() - seen);
      seen = p.count();
    }
    for (const v1::Trial& t : event.trials()) {
      const std::optional<TrialStatus> status = TrialStatusOf(t);
      if (status == TrialStatus::kRunning || status == TrialStatus::kPending ||
          status == TrialStatus::kPruned || shown.count(t.trial_id())) {
        continue;
      }
      if (!header) {
        *c.err << TrialTableHeader() << "\n";
        header = true;
      }
      *c.err << TrialRow(t) << "\n";
      shown.insert(t.trial_id());
    }
    if (j.state() != last_state) {
      *c.err << JobStateLine(j) << "\n";
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
    view->terminal = IsTerminalJobStateName(j.state());
    if (view->terminal) break;
  }
  if (c.interactive) *c.err << "\n";
  return reader->Finish();
}

// Follows the job to its end across reconnects (client/watch_retry.h);
// returns the last snapshot seen, or an error status.
grpc::Status Watch(const ClientContext& c, const std::string& job_id, v1::JobEvent* last) {
  const absl::Time deadline = absl::Now() + c.watch_timeout;
  WatchShown view;
  ReconnectOptions options;
  options.reconnect_for = c.reconnect_for;
  options.server = c.server;
  options.job_id = job_id;
  options.deadline = deadline;
  return FollowWithReconnect(
      [&](const std::function<void()>& delivered) {
        return WatchStream(c, job_id, deadline, &view, delivered, last);
      },
      [&] { return view.terminal; }, options, *c.err);
}

// Makes one request/answer RPC (`method` of the stub) under the RPC deadline.
template <typename Request, typename Response>
grpc::Status Call(const ClientContext& c,
                  grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                  const Request& request, Response* response) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, c.rpc_timeout);
  return (c.stub->*method)(&ctx, request, response);
}

// Shows an answer: the JSON document to_json() with --json, else print(out).
// Exit code 0.
template <typename ToJson, typename Print>
int Show(const ClientContext& c, const ToJson& to_json, const Print& print) {
  if (c.json) {
    WriteJson(*c.out, to_json());
  } else {
    print(*c.out);
  }
  return 0;
}

// The job's JSON document (with `trials` if given), or its summary in text.
int ShowJob(const ClientContext& c, const v1::Job& job,
            const std::vector<v1::Trial>* trials = nullptr) {
  return Show(
      c, [&] { return JobJson(job, trials); },
      [&](std::ostream& out) { PrintJobSummary(out, job); });
}

}  // namespace

grpc::Status FetchTrials(const ClientContext& c, const std::string& job_id, bool include_pruned,
                         std::vector<v1::Trial>* trials) {
  trials->clear();
  v1::ListTrialsRequest req;
  req.set_job_id(job_id);
  req.set_include_pruned(include_pruned);
  do {
    v1::ListTrialsResponse resp;
    grpc::Status s = Call(c, &Stub::ListTrials, req, &resp);
    if (!s.ok()) return s;
    trials->insert(trials->end(), resp.trials().begin(), resp.trials().end());
    req.set_page_token(resp.next_page_token());
  } while (!req.page_token().empty());
  return grpc::Status::OK;
}

grpc::Status FetchJob(const ClientContext& c, const std::string& job_id, v1::Job* job) {
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  return Call(c, &Stub::GetJob, req, job);
}

int TuneCommand(const ClientContext& c, const v1::TuneRequest& request, bool watch) {
  v1::SubmitJobRequest req;
  *req.mutable_request() = request;
  v1::Job job;
  if (grpc::Status s = Call(c, &Stub::SubmitJob, req, &job); !s.ok()) return RpcError(c, s);
  if (job.has_answered_from()) {  // finished already: nothing ran, nothing to watch
    *c.err << "job " << job.job_id() << ": " << AnsweredFromLine(job.answered_from()) << "\n";
    const std::vector<v1::Trial> none;
    return ShowJob(c, job, &none);
  }
  *c.err << "submitted job " << job.job_id() << " (" << job.trials_total()
         << " candidate strategies, time limit " << request.time_limit_seconds() << "s)\n";
  if (!watch) {
    return Show(
        c, [&] { return JobJson(job, nullptr); },
        [&](std::ostream& out) { out << job.job_id() << "\n"; });
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
  if (grpc::Status gs = FetchJob(c, job_id, &job); !gs.ok()) return RpcError(c, gs);
  if (!c.json) {
    // The rows went to stderr as they finished; repeat them on stdout unless
    // stdout is that same stream (2>&1), where they would show twice.
    if (!c.out_is_err && !job.has_answered_from()) {
      *c.out << "\n";
      PrintTrialTable(*c.out, trials, job);
    }
    *c.out << "\n";
  }
  if (!c.json && c.out_is_err && IsTerminalJobStateName(last.job().state()) &&
      last.job().state() == job.state()) {
    // The watch's last line was this state line, on this same stream.
    PrintJobDetails(*c.out, job);
  } else {
    ShowJob(c, job, &trials);
  }
  if (job.state() != "SUCCEEDED") return 1;
  return job.partial_evidence() ? kExitPartialEvidence : 0;
}

int JobsCommand(const ClientContext& c, int limit) {
  v1::ListJobsRequest req;
  req.set_limit(limit);
  v1::ListJobsResponse resp;
  if (grpc::Status s = Call(c, &Stub::ListJobs, req, &resp); !s.ok()) return RpcError(c, s);
  return Show(
      c, [&] { return JobListJson(resp); }, [&](std::ostream& out) { PrintJobList(out, resp); });
}

int JobCommand(const ClientContext& c, const std::string& job_id) {
  v1::Job job;
  if (grpc::Status s = FetchJob(c, job_id, &job); !s.ok()) return RpcError(c, s);
  return ShowJob(c, job);
}

int TrialsCommand(const ClientContext& c, const std::string& job_id, bool include_pruned) {
  std::vector<v1::Trial> trials;
  if (grpc::Status s = FetchTrials(c, job_id, include_pruned, &trials); !s.ok()) {
    return RpcError(c, s);
  }
  v1::Job job;
  if (grpc::Status s = FetchJob(c, job_id, &job); !s.ok()) return RpcError(c, s);
  return Show(
      c, [&] { return TrialListJson(job_id, trials, job); },
      [&](std::ostream& out) { PrintTrialTable(out, trials, job); });
}

int BestCommand(const ClientContext& c, const v1::QueryStrategiesRequest& request) {
  v1::QueryStrategiesResponse resp;
  if (grpc::Status s = Call(c, &Stub::QueryStrategies, request, &resp); !s.ok()) {
    return RpcError(c, s);
  }
  if (resp.answers().empty()) {
    const std::string what =
        absl::StrCat("no strategy recorded for this ", request.model().family(),
                     " model, sequence length and batch size");
    if (c.json) WriteJson(*c.out, NoStrategyJson(what));
    *c.err << "autoaccel: " << what << "\n";
    return kExitNothingRecorded;
  }
  const v1::StrategyAnswer& a = resp.answers(0);
  return Show(
      c, [&] { return StrategyAnswerJson(a); },
      [&](std::ostream& out) { PrintStrategyAnswer(out, a); });
}

int StrategiesCommand(const ClientContext& c, const v1::ListStrategiesRequest& request) {
  v1::ListStrategiesResponse resp;
  if (grpc::Status s = Call(c, &Stub::ListStrategies, request, &resp); !s.ok()) {
    return RpcError(c, s);
  }
  return Show(
      c, [&] { return StrategyListJson(resp); },
      [&](std::ostream& out) { PrintStrategyList(out, resp); });
}

grpc::Status ListAllWorkers(const ClientContext& c, v1::ListWorkersResponse* all) {
  v1::ListWorkersRequest request;
  std::vector<v1::Worker> gathered;
  v1::ListWorkersResponse last;
  do {
    last.Clear();
    if (grpc::Status s = Call(c, &Stub::ListWorkers, request, &last); !s.ok()) return s;
    request.set_page_token(last.next_page_token());
    for (v1::Worker& w : *last.mutable_workers()) gathered.push_back(std::move(w));
  } while (!request.page_token().empty());
  *all = std::move(last);  // the latest counts
  all->clear_workers();
  for (v1::Worker& w : gathered) *all->add_workers() = std::move(w);
  return grpc::Status::OK;
}

int WorkersCommand(const ClientContext& c) {
  v1::ListWorkersResponse resp;
  if (grpc::Status s = ListAllWorkers(c, &resp); !s.ok()) return RpcError(c, s);
  return Show(
      c, [&] { return WorkerListJson(resp); },
      [&](std::ostream& out) { PrintWorkerList(out, resp); });
}

int CancelCommand(const ClientContext& c, const std::string& job_id) {
  v1::CancelJobRequest req;
  req.set_job_id(job_id);
  v1::Job job;
  if (grpc::Status s = Call(c, &Stub::CancelJob, req, &job); !s.ok()) return RpcError(c, s);
  return ShowJob(c, job);
}

int LogsCommand(const ClientContext& c, const v1::GetTrialLogsRequest& request) {
  v1::TrialLogs logs;
  if (grpc::Status s = Call(c, &Stub::GetTrialLogs, request, &logs); !s.ok()) {
    return RpcError(c, s);
  }
  return Show(
      c, [&] { return TrialLogsJson(logs); },
      [&](std::ostream& out) { PrintTrialLogs(out, logs); });
}

}  // namespace autoaccel
