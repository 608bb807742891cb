// How the CLI shows what the server answered: the JSON documents printed
// with --json and the text tables and summaries printed without it. The e2e
// tests and users' scripts parse these formats (docs/CLI.md): a change here
// is a change to the CLI's contract.
//
// Pure functions of the messages given; the Print* ones write only to the
// stream passed in. Any thread.
#ifndef AUTOACCEL_CLIENT_RENDER_H_
#define AUTOACCEL_CLIENT_RENDER_H_

#include <ostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

// ---- JSON (--json) ----------------------------------------------------------

// Writes `doc` as stdout's one JSON document: indented by 2, then a newline
// (bytes of a string that are not UTF-8 written as U+FFFD).
void WriteJson(std::ostream& out, const nlohmann::json& doc);

// {"error": what, "code": code}: a failed RPC.
nlohmann::json ErrorJson(const std::string& what, int code);
nlohmann::json TrialJson(const v1::Trial& t);
// The job's summary, its best strategy (null if none) and the request as
// the server validated it; with `trials`, every trial too.
nlohmann::json JobJson(const v1::Job& j, const std::vector<v1::Trial>* trials);
// {"jobs": [JobJson...]}
nlohmann::json JobListJson(const v1::ListJobsResponse& jobs);
// {"job_id", "trials": [TrialJson...], "pruned_summary"}
nlohmann::json TrialListJson(const std::string& job_id, const std::vector<v1::Trial>& trials,
                             const v1::Job& job);
// The recorded best strategy for a model and hardware.
nlohmann::json StrategyAnswerJson(const v1::StrategyAnswer& a);
// {"best": null, "error": what}: nothing recorded.
nlohmann::json NoStrategyJson(const std::string& what);
// {"workers": [...]}, each with its devices.
nlohmann::json WorkerListJson(const v1::ListWorkersResponse& workers);
// {"trial_id", "attempt", "rank", "worker_id", "directory", "running",
//  "files": [{"name", "size_bytes", "truncated", "tail"}]}; bytes of a tail
// that are not UTF-8 become U+FFFD.
nlohmann::json TrialLogsJson(const v1::TrialLogs& logs);

// ---- Text ---------------------------------------------------------------------

// The trial table: a header, then one row per trial (no newlines).
std::string TrialTableHeader();
std::string TrialRow(const v1::Trial& t);
// The header, a row per trial that ran, and one line per kind of PRUNED
// candidates (they can be tens of thousands) with an example.
void PrintTrialTable(std::ostream& out, const std::vector<v1::Trial>& trials, const v1::Job& job);

// "job <id>: <STATE> — <status message>" (no newline).
std::string JobStateLine(const v1::Job& j);
// The job's state line, then PrintJobDetails.
void PrintJobSummary(std::ostream& out, const v1::Job& j);
// Its progress, search, infrastructure failures and best strategy with its
// figures (what follows the state line).
void PrintJobDetails(std::ostream& out, const v1::Job& j);
// One line of a followed job: a bar of its time limit, trials and best
// result so far (no newline).
std::string ProgressLine(const v1::Job& j);
// A followed job pruned `newly` more candidates of the kind `p` counts
// (a whole line, with its newline).
std::string PrunedProgressLine(const v1::PrunedSummary& p, int newly);

// A table of jobs, one line each.
void PrintJobList(std::ostream& out, const v1::ListJobsResponse& jobs);
// The recorded best strategy and its figures.
void PrintStrategyAnswer(std::ostream& out, const v1::StrategyAnswer& a);
// Each worker, its warnings and its devices.
void PrintWorkerList(std::ostream& out, const v1::ListWorkersResponse& workers);
// Where the rank ran, then each file as `tail` shows several:
// "==> stderr.log (2.1 KiB, last lines) <==" and its lines.
void PrintTrialLogs(std::ostream& out, const v1::TrialLogs& logs);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_RENDER_H_
