// A tuning request, checked and turned into the job it describes: every field
// within its bounds, the model read from its config, the search space
// enumerated and narrowed, defaults filled in. After validation the
// coordinator works from the typed JobSpec, never from the request's fields.
// Pure: no store, no workers; any thread.
#ifndef AUTOACCEL_SERVER_TUNE_REQUEST_H_
#define AUTOACCEL_SERVER_TUNE_REQUEST_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"
#include "search/proxy.h"
#include "search/searcher.h"
#include "server/model_file_store.h"
#include "spec/model_spec.h"
#include "spec/partial_strategy.h"
#include "spec/strategy.h"

namespace autoaccel {

// What a request that leaves a field at 0 gets.
struct TuneDefaults {
  int warmup_steps = 2;
  int measured_steps = 5;
  absl::Duration trial_timeout = absl::Minutes(10);
  double min_measured_seconds = 1.0;
  double confirm_tolerance = 0.05;  // repeats within 5% of each other agree (server/settle.h)
};

// The request's confirm_tolerance, or the default for one stored before the
// field existed (0).
inline double ConfirmTolerance(const v1::TuneRequest& r) {
  return r.confirm_tolerance() > 0 ? r.confirm_tolerance() : TuneDefaults().confirm_tolerance;
}

// A validated tuning job.
struct JobSpec {
  // The request with defaults filled in and without the torchscript file:
  // what the store keeps and clients are shown.
  v1::TuneRequest request;
  ModelSpec model;
  // The torchscript file as the request brought it (kept out of the
  // database and of every answer); null for the other families, and once
  // the job manager has written it to disk (model_file).
  std::shared_ptr<const std::string> script;
  // Where the coordinator keeps the torchscript file while the job is
  // unfinished (server/model_file_store.h); the workers are sent it from
  // there when they lack it (server/model_file_delivery.h).
  std::optional<ModelFileRef> model_file;
  std::string device_type;  // "cpu" or "cuda"
  int world_size = 1;       // ranks of every trial
  int seq_len = 0;
  int global_batch_size = 0;
  absl::Duration time_limit;
  int max_trials = 0;  // trials the search may run; 0: no limit
  int warmup_steps = 0;
  int measured_steps = 0;
  double min_measured_seconds = 0;
  absl::Duration trial_timeout;
  bool store_partial = false;  // store an answer that rests on partial evidence
  // How far two measurements of a strategy may differ and agree (> 0;
  // server/settle.h).
  double confirm_tolerance = 0;
  std::vector<Strategy> space;  // compatible, and allowed by include / exclude
  SearchAlgorithm algorithm = SearchAlgorithm::kAuto;
  std::optional<PartialStrategy> load;  // load_strategy
  bool finetune = false;                // search the loaded strategy's neighbourhood
  bool force = false;                   // tune even when the strategy database has an answer
  // request.launcher's definition (server/launcher_job.h): the job's trials
  // run the user's script on workers that have it; nullopt for the engine's.
  std::optional<v1::Launcher> launcher;
  // request.proxy (search/proxy.h): every trial runs its candidate's proxy,
  // and its figures are extrapolated to the full run; nullopt: full size.
  // `space` then holds only candidates the proxy can run.
  std::optional<ProxyMapping> proxy;
  // How the job measures, for people: "proxy trials: 2 of 8 layers on 2 of
  // 4 ranks (auto), 3 candidates the proxy cannot run left out"; "" at
  // full size.
  std::string proxy_note;
  // Ranks of each trial: the proxy's, else world_size.
  int TrialRanks() const { return proxy ? proxy->shape().world_size : world_size; }
};

// Checked before any costly work against server/request_limits.h's table:
// INVALID_ARGUMENT naming the field for a value out of range or malformed
// (time limit at most 30 days, trial timeout at most a day, warm-up and
// measured steps at most 10,000 each, world size at most 65,536, ...), and
// RESOURCE_EXHAUSTED naming it for something too big (a string over 16 KiB,
// a list over 256 entries, the config over 256 KiB or nested over 64 deep, a
// space of more than 250,000 combinations, counted before it is built).
//
// `launcher`: request.launcher's definition as the workers advertise it
// (WorkerPool::FindLauncher), null when the request names none. With one,
// the model config is optional (without it the model is
// UnknownLauncherModel()), device_type may name any device type (the
// script drives the device), and the space is restricted to the launcher
// (server/launcher_job.h). INTERNAL when request.launcher is set and
// `launcher` is null or names another.
absl::StatusOr<JobSpec> ValidateTuneRequest(v1::TuneRequest request, const TuneDefaults& defaults,
                                            const v1::Launcher* launcher = nullptr);

// The model a request describes: its config.json with the overrides applied
// (torchscript: the file's digest and input spec). INVALID_ARGUMENT naming
// the field. The caller has bounded its sizes (the config's and overrides'
// bytes and nesting: server/request_limits.h, as every request's check does).
absl::StatusOr<ModelSpec> ModelFromRequest(const v1::ModelSpec& model);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_TUNE_REQUEST_H_
