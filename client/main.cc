// autoaccel: the command-line client.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/credentials.h"
#include "client/estimate_command.h"
#include "client/export_command.h"
#include "client/flag_file.h"
#include "client/model_flags.h"
#include "client/report_command.h"
#include "common/duration.h"
#include "proto/convert.h"
#include "proto/request_space.h"
#include "search/space_dimensions.h"
#include "spec/field_table.h"

namespace {

// What tune and best describe: the model (client/model_flags.h) and the
// cluster's shape.
struct JobShapeFlags {
  autoaccel::ModelFlags model;
  int seq_len = 0;
  int global_batch_size = 0;
  int world_size = 1;
  std::string device = "cpu";

  void Add(CLI::App* cmd, const std::string& family_note = "") {
    autoaccel::ModelFlags::Use use;
    use.torchscript = true;
    use.family_note = family_note;
    model.Add(cmd, use);
    cmd->add_option("--seq-len", seq_len, "sequence length")->required();
    cmd->add_option("--global-batch-size", global_batch_size, "samples per optimizer step")
        ->required();
    cmd->add_option("--world-size", world_size,
                    "ranks per trial = the size of the cluster you will train on (default 1)");
    cmd->add_option("--device", device, "device type the trials run on: cpu or cuda");
  }
  // The model the flags name; prints one line and returns false if it
  // cannot be read. `launcher`: the job runs a launcher's script (tune
  // --launcher), whose model needs no description.
  bool Fill(autoaccel::v1::ModelSpec* spec, bool launcher = false) const {
    const absl::Status filled = model.Fill(spec, /*optional=*/launcher);
    if (!filled.ok()) std::cerr << "autoaccel: " << filled.message() << "\n";
    return filled.ok();
  }
};

// Parses the duration given to `flag`; prints one line and returns false if
// it is not one.
bool ParseDurationFlag(const char* flag, const std::string& text, absl::Duration* out) {
  absl::StatusOr<absl::Duration> d = autoaccel::ParseDuration(text);
  if (!d.ok()) {
    std::cerr << "autoaccel: " << flag << ": " << d.status().message() << "\n";
    return false;
  }
  *out = *d;
  return true;
}

// "5%" or "0.05" as 0.05; false (having said why) for anything else.
bool ParseFractionFlag(const char* flag, const std::string& text, double* out) {
  std::string number = text;
  const bool percent = !number.empty() && number.back() == '%';
  if (percent) number.pop_back();
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0) {
    std::cerr << "autoaccel: " << flag << ": expected a fraction such as 0.05 or a percentage "
              << "such as 5%, got '" << text << "'\n";
    return false;
  }
  *out = percent ? value / 100 : value;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"autoaccel: find the fastest way to train a transformer on your GPUs"};
  app.require_subcommand(1);
  app.fallthrough();
  std::string server = "127.0.0.1:50051";
  bool json = false;
  app.add_option("--server", server, "HOST:PORT of autoaccel-server")->envname("AUTOACCEL_SERVER");
  autoaccel::CredentialFlags credentials;
  autoaccel::AddCredentialFlags(&app, &credentials);
  app.add_flag("--json", json, "print one JSON document on stdout (for scripts)");
  std::string rpc_timeout = autoaccel::FormatDuration(autoaccel::kDefaultRpcTimeout);
  app.add_option("--rpc-timeout", rpc_timeout,
                 "how long each request waits for the server's answer, e.g. 30s")
      ->capture_default_str();
  // tune and watch follow the job's stream up to this long.
  std::string watch_timeout = autoaccel::FormatDuration(autoaccel::kDefaultWatchTimeout);
  const std::string watch_timeout_help =
      "how long to follow the job before giving up (it keeps running), e.g. 72h";
  std::string reconnect_for = autoaccel::FormatDuration(autoaccel::kDefaultReconnectFor);
  const std::string reconnect_for_help =
      "how long to keep reconnecting when the server is lost while following a job "
      "(backoff 0.5s doubling to 10s; 0 = give up at once)";

  JobShapeFlags tune_model;
  std::string time_limit = "10m";
  int max_trials = 0, warmup = 0, measured = 0;
  std::string trial_timeout;
  bool detach = false;
  CLI::App* tune = app.add_subcommand("tune", "submit a tuning job and watch it to the end");
  tune_model.Add(tune, " (optional with --launcher)");
  std::string launcher;
  tune->add_option("--launcher", launcher,
                   "run each trial with this launcher of the workers (their --launchers file; "
                   "`autoaccel workers` lists them): your own training script, measured by "
                   "itself (docs/LAUNCHERS.md); --model and --model-config are then optional");
  tune->add_option("--time-limit", time_limit, "hard limit for the whole job: 90s, 10m, 1h");
  tune->add_option("--max-trials", max_trials, "stop after this many trials (0 = no limit)");
  // Candidate values per searched dimension, one flag per row of
  // search/space_dimensions.h; empty = every value that applies and the
  // device supports (docs/CLI.md). The server validates the names.
  std::vector<std::vector<std::string>> candidates(autoaccel::kNumSpaceDimensions);
  {
    size_t i = 0;
    autoaccel::ForEachRow(autoaccel::kSpaceDimensions, [&](const auto& row) {
      CLI::Option* option =
          tune->add_option(std::string(row.flag), candidates[i++], std::string(row.help))
              ->delimiter(',');
      if constexpr (std::is_same_v<autoaccel::RowValue<decltype(row)>, int>) {
        option->check(CLI::Number);
      }
    });
  }
  // How to search (docs/CLI.md, "Search").
  std::string algorithm = "auto", load_strategy;
  std::vector<std::string> include, exclude;
  bool finetune = false;
  tune->add_option("--algorithm", algorithm,
                   "search algorithm: auto (default), exhaustive, greedy, bayes, halving");
  tune->add_option("--exclude", exclude,
                   "methods no tried strategy may use, e.g. zero1,fsdp,fp16 (ATorch names)")
      ->delimiter(',');
  tune->add_option("--include", include,
                   "methods every tried strategy must use, e.g. checkpoint,amp_native")
      ->delimiter(',');
  tune->add_option("--load-strategy", load_strategy,
                   "semi-automatic: a partial strategy ('precision=bf16,checkpoint=full' or "
                   "ATorch's '[\"zero2\", (\"amp_native\", {\"dtype\": \"bf16\"})]'); the "
                   "rest is filled with the model's best guess and run once");
  tune->add_flag("--finetune", finetune,
                 "with --load-strategy: search the loaded strategy's neighbourhood instead");
  tune->add_option("--warmup-steps", warmup, "untimed steps per trial (default 2)");
  tune->add_option("--measured-steps", measured, "timed steps per trial (default 5)");
  tune->add_option("--trial-timeout", trial_timeout, "limit for one trial, e.g. 5m");
  std::string min_measured;
  tune->add_option("--min-measured-time", min_measured,
                   "timed steps continue until they cover this long, e.g. 2s (default 1s)");
  std::string confirm_tolerance;
  tune->add_option("--confirm-tolerance", confirm_tolerance,
                   "how far two measurements of a strategy may differ and agree, e.g. 3% "
                   "(default 5%): the answer is settled, a tie, or provisional by it");
  tune->add_flag("--detach", detach, "print the job id and return without watching");
  tune->add_option("--watch-timeout", watch_timeout, watch_timeout_help)->capture_default_str();
  tune->add_option("--reconnect-for", reconnect_for, reconnect_for_help)->capture_default_str();
  bool store_partial = false;
  tune->add_flag("--store-partial", store_partial,
                 "store the answer as the model's best even when trials were lost to "
                 "infrastructure failures (partial evidence)");
  bool force = false;
  tune->add_flag("--force", force,
                 "tune even when the strategy database already answers this model and "
                 "hardware (by default such a request is answered at once, running nothing)");
  std::string proxy;
  tune->add_option("--proxy", proxy,
                   "measure each candidate on a smaller proxy and extrapolate to the full run: "
                   "layers=N[,world-size=M] (the model's first N layers on M ranks) or auto");

  CLI::App* watch = app.add_subcommand("watch", "follow a running job to its end");
  std::string job_id;
  watch->add_option("job_id", job_id, "job id")->required();
  watch->add_option("--watch-timeout", watch_timeout, watch_timeout_help)->capture_default_str();
  watch->add_option("--reconnect-for", reconnect_for, reconnect_for_help)->capture_default_str();
  int limit = 20;
  CLI::App* jobs = app.add_subcommand("jobs", "list recent jobs");
  jobs->add_option("--limit", limit, "how many");
  CLI::App* job = app.add_subcommand("job", "show one job");
  job->add_option("job_id", job_id, "job id")->required();
  CLI::App* trials = app.add_subcommand("trials", "list a job's trials");
  trials->add_option("job_id", job_id, "job id")->required();
  bool include_pruned = false;
  trials->add_flag("--include-pruned", include_pruned,
                   "list every PRUNED candidate too (by default they are counted by kind)");
  JobShapeFlags best_model;
  CLI::App* best = app.add_subcommand("best", "look up the best recorded strategy (runs nothing)");
  best_model.Add(best);
  autoaccel::v1::ListStrategiesRequest strategies_request;
  CLI::App* strategies = app.add_subcommand(
      "strategies", "list the strategy database's answers with their provenance (runs nothing)");
  strategies->add_option("--model", *strategies_request.mutable_model_family(),
                         "only this model family, e.g. gpt2, or a launcher's answers: "
                         "launcher:NAME");
  strategies->add_option("--device", *strategies_request.mutable_device_type(),
                         "only answers measured on this device type: cpu or cuda");
  int strategies_limit = 0;
  strategies->add_option("--limit", strategies_limit, "how many, newest first (default 100)");
  CLI::App* logs = app.add_subcommand(
      "logs",
      "show a trial rank's log files (stderr, stdout, metrics lines) from the worker that ran it");
  std::string logs_trial;
  int logs_index = -1, logs_rank = 0, logs_tail = 0;
  logs->add_option("trial", logs_trial,
                   "the trial's id (JOB-tNNNN, as --json shows), or its job's id followed by "
                   "the trial's # in the trial tables")
      ->required();
  logs->add_option("index", logs_index, "the trial's # when the first argument is a job id")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--rank", logs_rank, "which rank of the trial (default 0)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--tail", logs_tail,
                   "the last N lines of each file (default 100, at most 10000)")
      ->check(CLI::NonNegativeNumber);
  CLI::App* workers = app.add_subcommand("workers", "list worker daemons and their devices");
  CLI::App* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("job_id", job_id, "job id")->required();
  autoaccel::ReportFlags report_flags;
  CLI::App* report = autoaccel::AddReportCommand(&app, &report_flags);
  autoaccel::ExportFlags export_flags;
  CLI::App* export_cmd = autoaccel::AddExportCommand(&app, &export_flags);
  // estimate runs offline (no server): answered right after parsing.
  autoaccel::EstimateFlags estimate_flags;
  CLI::App* estimate = autoaccel::AddEstimateCommand(&app, &estimate_flags);
  try {
    app.parse(argc, argv);
    if (*estimate) return autoaccel::EstimateCommand(estimate_flags, json, std::cout, std::cerr);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 1, as documented
    // (CLI11's own codes, 104, 106, ..., mean nothing to a script).
    return app.exit(e) == 0 ? 0 : 1;
  }

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      autoaccel::OpenServerChannel(server, credentials);
  if (!channel.ok()) {
    std::cerr << "autoaccel: " << channel.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<autoaccel::v1::TuningService::Stub> stub =
      autoaccel::v1::TuningService::NewStub(*channel);
  autoaccel::ClientContext c;
  c.stub = stub.get();
  c.server = server;
  c.json = json;
  c.out = &std::cout;
  c.err = &std::cerr;
  c.interactive = ::isatty(STDERR_FILENO) != 0;
  struct stat out_stat, err_stat;
  c.out_is_err = ::fstat(STDOUT_FILENO, &out_stat) == 0 && ::fstat(STDERR_FILENO, &err_stat) == 0 &&
                 out_stat.st_dev == err_stat.st_dev && out_stat.st_ino == err_stat.st_ino;
  if (!ParseDurationFlag("--rpc-timeout", rpc_timeout, &c.rpc_timeout) ||
      !ParseDurationFlag("--watch-timeout", watch_timeout, &c.watch_timeout) ||
      !ParseDurationFlag("--reconnect-for", reconnect_for, &c.reconnect_for)) {
    return 1;
  }

  if (*tune) {
    autoaccel::v1::TuneRequest request;
    if (!tune_model.Fill(request.mutable_model(), !launcher.empty())) return 1;
    request.set_launcher(launcher);
    absl::Duration d;
    if (!ParseDurationFlag("--time-limit", time_limit, &d)) return 1;
    request.set_time_limit_seconds(absl::ToDoubleSeconds(d));
    if (!trial_timeout.empty()) {
      if (!ParseDurationFlag("--trial-timeout", trial_timeout, &d)) return 1;
      request.set_trial_timeout_seconds(absl::ToDoubleSeconds(d));
    }
    if (!min_measured.empty()) {
      if (!ParseDurationFlag("--min-measured-time", min_measured, &d)) return 1;
      request.set_min_measured_seconds(absl::ToDoubleSeconds(d));
    }
    if (!confirm_tolerance.empty()) {
      double tolerance = 0;
      if (!ParseFractionFlag("--confirm-tolerance", confirm_tolerance, &tolerance)) return 1;
      request.set_confirm_tolerance(tolerance);
    }
    request.set_seq_len(tune_model.seq_len);
    request.set_global_batch_size(tune_model.global_batch_size);
    request.set_world_size(tune_model.world_size);
    request.set_device_type(tune_model.device);
    request.set_max_trials(max_trials);
    request.set_warmup_steps(warmup);
    request.set_measured_steps(measured);
    {
      size_t i = 0;
      absl::Status added;
      autoaccel::ForEachRow(autoaccel::kSpaceDimensions, [&](const auto& row) {
        for (const std::string& value : candidates[i]) {
          if (added.ok()) added = autoaccel::AddCandidate(row.request_field, value, &request);
        }
        ++i;
      });
      if (!added.ok()) {
        std::cerr << "autoaccel: " << added.message() << "\n";
        return 1;
      }
    }
    request.set_algorithm(algorithm);
    for (const std::string& m : include) request.add_include(m);
    for (const std::string& m : exclude) request.add_exclude(m);
    request.set_load_strategy(load_strategy);
    request.set_finetune(finetune);
    request.set_store_partial(store_partial);
    request.set_force(force);
    request.set_proxy(proxy);
    return autoaccel::TuneCommand(c, request, !detach);
  }
  if (*watch) return autoaccel::WatchCommand(c, job_id);
  if (*jobs) return autoaccel::JobsCommand(c, limit);
  if (*job) return autoaccel::JobCommand(c, job_id);
  if (*trials) return autoaccel::TrialsCommand(c, job_id, include_pruned);
  if (*best) {
    autoaccel::v1::QueryStrategiesRequest request;
    if (!best_model.Fill(request.mutable_model())) return 1;
    request.set_seq_len(best_model.seq_len);
    request.set_global_batch_size(best_model.global_batch_size);
    request.set_world_size(best_model.world_size);
    request.set_device_type(best_model.device);
    return autoaccel::BestCommand(c, request);
  }
  if (*strategies) {
    strategies_request.set_limit(strategies_limit);
    return autoaccel::StrategiesCommand(c, strategies_request);
  }
  if (*logs) {
    autoaccel::v1::GetTrialLogsRequest request;
    if (logs_index >= 0) {
      request.set_job_id(logs_trial);
      request.set_index(logs_index);
    } else {
      request.set_trial_id(logs_trial);
    }
    request.set_rank(logs_rank);
    request.set_tail_lines(logs_tail);
    return autoaccel::LogsCommand(c, request);
  }
  if (*workers) return autoaccel::WorkersCommand(c);
  if (*cancel) return autoaccel::CancelCommand(c, job_id);
  if (*report) return autoaccel::ReportCommand(c, report_flags);
  if (*export_cmd) return autoaccel::ExportCommand(c, export_flags);
  return 1;
}
