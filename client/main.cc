// autoaccel: the command-line client.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "common/duration.h"

namespace {

struct ModelFlags {
  std::string family;
  std::string config_file;
  int seq_len = 0;
  int global_batch_size = 0;
  int world_size = 1;
  std::string device = "cpu";
  std::vector<std::string> overrides;

  void Add(CLI::App* cmd) {
    cmd->add_option("--model", family, "model family: gpt2, llama, bert, mixtral")->required();
    cmd->add_option("--override", overrides,
                    "KEY=VALUE change to the config (repeatable), e.g. --override n_layer=2");
    cmd->add_option("--model-config", config_file, "Hugging Face style config.json")->required();
    cmd->add_option("--seq-len", seq_len, "sequence length")->required();
    cmd->add_option("--global-batch-size", global_batch_size, "samples per optimizer step")
        ->required();
    cmd->add_option("--world-size", world_size, "ranks per trial (1 for now)");
    cmd->add_option("--device", device, "device type the trials run on: cpu or cuda");
  }
  // Reads the config file; prints one line and returns false if it cannot.
  bool Fill(autoaccel::v1::ModelSpec* model) const {
    std::ifstream in(config_file);
    if (!in) {
      std::cerr << "autoaccel: --model-config: cannot read " << config_file << "\n";
      return false;
    }
    std::stringstream text;
    text << in.rdbuf();
    model->set_family(family);
    model->set_config_json(text.str());
    for (const std::string& o : overrides) model->add_overrides(o);
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"autoaccel: find the fastest way to train a transformer on your GPUs"};
  app.require_subcommand(1);
  app.fallthrough();
  std::string server = "127.0.0.1:50051";
  bool json = false;
  app.add_option("--server", server, "HOST:PORT of autoaccel-server")->envname("AUTOACCEL_SERVER");
  app.add_flag("--json", json, "print one JSON document on stdout (for scripts)");

  ModelFlags tune_model;
  std::string time_limit = "10m";
  int max_trials = 0, warmup = 0, measured = 0;
  std::vector<int> micro_batch_sizes;
  std::string trial_timeout;
  bool detach = false;
  CLI::App* tune = app.add_subcommand("tune", "submit a tuning job and watch it to the end");
  tune_model.Add(tune);
  tune->add_option("--time-limit", time_limit, "hard limit for the whole job: 90s, 10m, 1h");
  tune->add_option("--max-trials", max_trials, "stop after this many trials (0 = no limit)");
  tune->add_option("--micro-batch-sizes", micro_batch_sizes,
                   "micro-batch sizes to try (default: powers of two)")
      ->delimiter(',');
  tune->add_option("--warmup-steps", warmup, "untimed steps per trial (default 2)");
  tune->add_option("--measured-steps", measured, "timed steps per trial (default 5)");
  tune->add_option("--trial-timeout", trial_timeout, "limit for one trial, e.g. 5m");
  tune->add_flag("--detach", detach, "print the job id and return without watching");

  CLI::App* watch = app.add_subcommand("watch", "follow a running job to its end");
  std::string job_id;
  watch->add_option("job_id", job_id, "job id")->required();
  int limit = 20;
  CLI::App* jobs = app.add_subcommand("jobs", "list recent jobs");
  jobs->add_option("--limit", limit, "how many");
  CLI::App* job = app.add_subcommand("job", "show one job");
  job->add_option("job_id", job_id, "job id")->required();
  CLI::App* trials = app.add_subcommand("trials", "list a job's trials");
  trials->add_option("job_id", job_id, "job id")->required();
  ModelFlags best_model;
  CLI::App* best = app.add_subcommand("best", "look up the best recorded strategy (runs nothing)");
  best_model.Add(best);
  CLI::App* workers = app.add_subcommand("workers", "list worker daemons and their devices");
  CLI::App* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("job_id", job_id, "job id")->required();
  CLI11_PARSE(app, argc, argv);

  auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  std::unique_ptr<autoaccel::v1::TuningService::Stub> stub =
      autoaccel::v1::TuningService::NewStub(channel);
  autoaccel::ClientContext c;
  c.stub = stub.get();
  c.server = server;
  c.json = json;
  c.out = &std::cout;
  c.err = &std::cerr;
  c.interactive = ::isatty(STDERR_FILENO) != 0;

  if (*tune) {
    autoaccel::v1::TuneRequest request;
    if (!tune_model.Fill(request.mutable_model())) return 1;
    auto limit_d = autoaccel::ParseDuration(time_limit);
    if (!limit_d.ok()) {
      std::cerr << "autoaccel: --time-limit: " << limit_d.status().message() << "\n";
      return 1;
    }
    request.set_time_limit_seconds(absl::ToDoubleSeconds(*limit_d));
    if (!trial_timeout.empty()) {
      auto t = autoaccel::ParseDuration(trial_timeout);
      if (!t.ok()) {
        std::cerr << "autoaccel: --trial-timeout: " << t.status().message() << "\n";
        return 1;
      }
      request.set_trial_timeout_seconds(absl::ToDoubleSeconds(*t));
    }
    request.set_seq_len(tune_model.seq_len);
    request.set_global_batch_size(tune_model.global_batch_size);
    request.set_world_size(tune_model.world_size);
    request.set_device_type(tune_model.device);
    request.set_max_trials(max_trials);
    request.set_warmup_steps(warmup);
    request.set_measured_steps(measured);
    for (int m : micro_batch_sizes) request.add_micro_batch_sizes(m);
    return autoaccel::TuneCommand(c, request, !detach);
  }
  if (*watch) return autoaccel::WatchCommand(c, job_id);
  if (*jobs) return autoaccel::JobsCommand(c, limit);
  if (*job) return autoaccel::JobCommand(c, job_id);
  if (*trials) return autoaccel::TrialsCommand(c, job_id);
  if (*best) {
    autoaccel::v1::QueryStrategiesRequest request;
    if (!best_model.Fill(request.mutable_model())) return 1;
    request.set_seq_len(best_model.seq_len);
    request.set_global_batch_size(best_model.global_batch_size);
    request.set_world_size(best_model.world_size);
    request.set_device_type(best_model.device);
    return autoaccel::BestCommand(c, request);
  }
  if (*workers) return autoaccel::WorkersCommand(c);
  if (*cancel) return autoaccel::CancelCommand(c, job_id);
  return 1;
}
