#include "server/tune_request.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/content_digest.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "proto/request_space.h"
#include "search/load_strategy.h"
#include "search/method_filter.h"
#include "search/space.h"
#include "server/launcher_job.h"
#include "server/request_limits.h"
#include "spec/model_overrides.h"

namespace autoaccel {
namespace {

// Default warm-up for torchscript jobs (see ValidateTuneRequest).
constexpr int kTorchScriptWarmupSteps = 3;

// A time limit must leave time for a trial: positive (the bounds' table,
// server/request_limits.h, allows 0 for the numbers it bounds).
absl::Status CheckTimeLimitPositive(const v1::TuneRequest& r) {
  if (r.time_limit_seconds() > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("time_limit_seconds: must be a positive number of seconds, got ",
                   r.time_limit_seconds(), "s"));
}

}  // namespace

absl::StatusOr<ModelSpec> ModelFromRequest(const v1::ModelSpec& m) {
  if (m.family() == "torchscript") {
    if (!m.overrides().empty() || !m.new_overrides().empty()) {
      return absl::InvalidArgumentError(
          "override: not supported for torchscript models (change the module and save it again)");
    }
    if (m.script().empty()) {
      return absl::InvalidArgumentError("model_file: missing or empty (--model-file FILE.pt)");
    }
    if (m.input_spec().empty()) {
      return absl::InvalidArgumentError(
          "input_spec: missing (--input-spec, e.g. \"input_ids:int64[B,T]<50257; "
          "labels=input_ids\")");
    }
    const nlohmann::json config{{"input_spec", m.input_spec()},
                                {"script_digest", ContentDigest(m.script())},
                                {"script_bytes", static_cast<int64_t>(m.script().size())}};
    return ModelSpecFromJson(m.family(), config);
  }
  ASSIGN_OR_RETURN(nlohmann::json config, ParseUntrustedJson(m.config_json(), "model_config"));
  // Keys the config has first, then the new ones (override[i] counts
  // through both in this order).
  const std::vector<std::string> overrides(m.overrides().begin(), m.overrides().end());
  const std::vector<std::string> new_overrides(m.new_overrides().begin(), m.new_overrides().end());
  return ModelSpecWithOverrides(m.family(), std::move(config), overrides, new_overrides);
}

namespace {

// request.proxy: the mapping of the job's candidates to proxy trials, and
// the space cut to those a proxy can run.
absl::Status SetUpProxy(const v1::TuneRequest& r, JobSpec* out) {
  if (r.proxy().empty()) return absl::OkStatus();
  if (out->launcher) {
    return absl::InvalidArgumentError(
        "proxy: a launcher's trials run the user's own script, whose layers autoaccel cannot "
        "cut; proxy trials are for the engine's models");
  }
  if (out->model.IsTorchScript()) {
    return absl::InvalidArgumentError(
        "proxy: a torchscript model's layers are unknown; proxy trials need a transformer family");
  }
  ASSIGN_OR_RETURN(const ProxyRequest request, ParseProxyRequest(r.proxy()));
  TrainingSetup full;
  full.model = out->model;
  full.seq_len = r.seq_len();
  full.global_batch_size = r.global_batch_size();
  full.world_size = r.world_size();
  full.device_is_accelerator = r.device_type() != "cpu";
  ProxyShape shape{request.layers, request.world_size > 0 ? request.world_size : r.world_size()};
  if (request.automatic) {
    ASSIGN_OR_RETURN(shape, ChooseProxy(full, out->space, r.world_size()));
    if (shape.layers == full.model.n_layer && shape.world_size == full.world_size) {
      out->proxy_note =
          "proxy auto: the model is as small as its proxy would be; measured at full size";
      return absl::OkStatus();
    }
  }
  ASSIGN_OR_RETURN(ProxyMapping mapping, ProxyMapping::Create(full, shape));
  const size_t before = out->space.size();
  std::string example;
  out->space.erase(std::remove_if(out->space.begin(), out->space.end(),
                                  [&](const Strategy& s) {
                                    absl::StatusOr<ProxyTrial> t = mapping.TrialOf(s);
                                    if (t.ok()) return false;
                                    if (example.empty())
                                      example = std::string(t.status().message());
                                    return true;
                                  }),
                   out->space.end());
  if (out->space.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("proxy: none of the ", before,
                                                   " candidate strategies can run on the proxy (",
                                                   mapping.Describe(), "; e.g. ", example, ")"));
  }
  out->proxy_note =
      absl::StrCat("proxy trials: ", mapping.Describe(), request.automatic ? " (auto)" : "");
  if (out->space.size() < before) {
    absl::StrAppend(&out->proxy_note, ", ", before - out->space.size(),
                    " candidate(s) the proxy cannot run left out");
  }
  out->proxy = std::move(mapping);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobSpec> ValidateTuneRequest(v1::TuneRequest in, const TuneDefaults& defaults,
                                            const v1::Launcher* launcher) {
  RETURN_IF_ERROR(CheckTuneRequestLimits(in));  // sizes and numbers (server/request_limits.h)
  JobSpec out;
  out.request = std::move(in);
  v1::TuneRequest& r = out.request;
  if (!r.launcher().empty() && (launcher == nullptr || launcher->name() != r.launcher())) {
    return absl::InternalError(
        absl::StrCat("launcher '", r.launcher(), "': validated without its definition"));
  }
  const bool described = !r.model().family().empty() || !r.model().config_json().empty();
  if (launcher == nullptr && r.model().family().empty()) {
    return absl::InvalidArgumentError(
        "model.family: missing (allowed: " + absl::StrJoin(KnownModelFamilies(), ", ") + ")");
  }
  if (launcher != nullptr && r.model().family() == "torchscript") {
    return absl::InvalidArgumentError(
        "model: a launcher's trials run the user's own script; a TorchScript module is for the "
        "engine's trials (give the model's config.json, or no model)");
  }
  if (launcher != nullptr && described && r.model().family().empty()) {
    return absl::InvalidArgumentError(
        "model.family: missing with the model's config (--model FAMILY --model-config FILE)");
  }
  RETURN_IF_ERROR(CheckTimeLimitPositive(r));
  if (launcher == nullptr || described) {
    ASSIGN_OR_RETURN(out.model, ModelFromRequest(r.model()));
  } else {
    out.model = UnknownLauncherModel();
  }
  RETURN_IF_ERROR(CheckModelLimits(out.model));
  // Every trial runs world_size ranks (the search space's layouts multiply
  // to it); a bad one is refused by ValidateSpaceRequest, naming the field.
  if (r.world_size() == 0) r.set_world_size(1);
  if (r.device_type().empty()) r.set_device_type("cpu");
  if (launcher != nullptr) {
    // The user's script drives the device: any type a worker registered.
    const std::string& t = r.device_type();
    // (Its length is bounded with the request's: Limit::kDeviceTypeBytes.)
    if (!absl::ascii_islower(t[0]) || !std::all_of(t.begin(), t.end(), [](char c) {
          return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
        })) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_type: '", t,
                       "' is no device type (lower-case letters, digits and '_', e.g. cuda, "
                       "musa, xpu)"));
    }
  } else if (r.device_type() != "cpu" && r.device_type() != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("device_type: unknown '", r.device_type(), "' (allowed: cpu, cuda)"));
  }
  if (r.warmup_steps() == 0) {
    // TorchScript's executor profiles and optimises the graph over the first
    // calls (~3 steps): measuring them would time the compiler, not the model.
    r.set_warmup_steps(r.model().family() == "torchscript"
                           ? std::max(defaults.warmup_steps, kTorchScriptWarmupSteps)
                           : defaults.warmup_steps);
  }
  if (r.measured_steps() == 0) r.set_measured_steps(defaults.measured_steps);
  if (r.min_measured_seconds() == 0) r.set_min_measured_seconds(defaults.min_measured_seconds);
  if (r.confirm_tolerance() == 0) r.set_confirm_tolerance(defaults.confirm_tolerance);
  if (r.trial_timeout_seconds() == 0) {
    r.set_trial_timeout_seconds(absl::ToDoubleSeconds(defaults.trial_timeout));
  }
  SpaceRequest space;
  space.model = out.model;
  space.seq_len = r.seq_len();
  space.global_batch_size = r.global_batch_size();
  space.world_size = r.world_size();
  RETURN_IF_ERROR(SpaceListsFromRequest(r, &space));  // search/space_dimensions.h
  space.device_is_accelerator = r.device_type() != "cpu";
  space.max_combinations = LimitMax(Limit::kSpaceCombinations);
  if (launcher != nullptr) RETURN_IF_ERROR(RestrictSpaceToLauncher(*launcher, r, &space));
  ASSIGN_OR_RETURN(out.space, EnumerateSpace(space));
  if (launcher != nullptr) {
    if (LauncherFixesMicroBatch(*launcher)) {
      out.space.erase(std::remove_if(out.space.begin(), out.space.end(),
                                     [](const Strategy& s) { return s.grad_accum_steps != 1; }),
                      out.space.end());
    }
    RETURN_IF_ERROR(KeepExportable(*launcher, out.model, r.world_size(), r.global_batch_size(),
                                   r.seq_len(), &out.space));
    out.launcher = *launcher;
  }
  if (r.algorithm().empty()) r.set_algorithm("auto");
  ASSIGN_OR_RETURN(out.algorithm, ParseSearchAlgorithm(r.algorithm()));
  const std::vector<std::string> include(r.include().begin(), r.include().end());
  const std::vector<std::string> exclude(r.exclude().begin(), r.exclude().end());
  ASSIGN_OR_RETURN(MethodFilter filter, ParseMethodFilter(include, exclude));
  if (!filter.empty()) {
    const size_t before = out.space.size();
    std::string example;
    out.space.erase(std::remove_if(out.space.begin(), out.space.end(),
                                   [&](const Strategy& s) {
                                     if (filter.Allows(s)) return false;
                                     if (example.empty()) example = filter.Refusal(s);
                                     return true;
                                   }),
                    out.space.end());
    if (out.space.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("include, exclude: none of the ", before,
                                                     " candidate strategies is left (e.g. ",
                                                     example, ")"));
    }
  }
  if (r.finetune() && r.load_strategy().empty()) {
    return absl::InvalidArgumentError("finetune: needs a strategy to start from (--load-strategy)");
  }
  if (!r.load_strategy().empty()) {
    if (r.algorithm() != "auto") {
      return absl::InvalidArgumentError(
          "algorithm: not with load_strategy (it runs the loaded strategy, or with finetune "
          "searches its neighbourhood greedily)");
    }
    if (JsonNestingDepth(r.load_strategy()) > kMaxJsonDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("load_strategy: nested deeper than ", kMaxJsonDepth, " levels"));
    }
    ASSIGN_OR_RETURN(PartialStrategy load, ParseLoadStrategy(r.load_strategy()));
    if (std::none_of(out.space.begin(), out.space.end(),
                     [&](const Strategy& s) { return load.Matches(s); })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "load_strategy: no candidate of the space matches '", load.ToText(),
          "' (check its values against the request's world size, batch and candidate lists)"));
    }
    out.load = std::move(load);
  }
  RETURN_IF_ERROR(SetUpProxy(r, &out));
  if (!r.model().script().empty()) {
    // Moved out, not copied and cleared: a cleared string keeps its capacity,
    // and the request (kept for the job's life) would hold the file's size.
    out.script =
        std::make_shared<const std::string>(std::move(*r.mutable_model()->mutable_script()));
    std::string().swap(*r.mutable_model()->mutable_script());
  }
  out.device_type = r.device_type();
  out.world_size = r.world_size();
  out.seq_len = r.seq_len();
  out.global_batch_size = r.global_batch_size();
  out.time_limit = absl::Seconds(r.time_limit_seconds());
  out.max_trials = r.max_trials();
  out.warmup_steps = r.warmup_steps();
  out.measured_steps = r.measured_steps();
  out.min_measured_seconds = r.min_measured_seconds();
  out.trial_timeout = absl::Seconds(r.trial_timeout_seconds());
  out.store_partial = r.store_partial();
  out.confirm_tolerance = r.confirm_tolerance();
  out.finetune = r.finetune();
  out.force = r.force();
  return out;
}

}  // namespace autoaccel
