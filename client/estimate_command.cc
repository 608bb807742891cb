#include "client/estimate_command.h"

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/flag_file.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "nlohmann/json.hpp"
#include "search/device_catalog.h"
#include "search/estimate.h"
#include "search/model_overrides.h"

namespace autoaccel {
namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr int64_t kMaxInputBytes = int64_t{64} << 20;

absl::StatusOr<std::string> ReadInput(absl::string_view flag, const std::string& path) {
  return ReadFlagFile(flag, path, kMaxInputBytes);
}

absl::StatusOr<DeviceCatalog> Catalog(const EstimateFlags& f) {
  ASSIGN_OR_RETURN(DeviceCatalog catalog, DeviceCatalog::BuiltIn());
  if (!f.catalog_file.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadInput("--device-catalog", f.catalog_file));
    ASSIGN_OR_RETURN(const DeviceCatalog user, DeviceCatalog::Parse(text, f.catalog_file));
    catalog.Merge(user);
  }
  return catalog;
}

// The model as `tune` reads it: config.json, --override then --override-new.
absl::StatusOr<ModelSpec> Model(const EstimateFlags& f) {
  if (f.family == "torchscript") {
    return absl::InvalidArgumentError(
        "--model torchscript: a TorchScript module's shape is unknown, so it cannot be estimated; "
        "give its Hugging Face family and --model-config");
  }
  if (f.config_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", f.family, " needs --model-config FILE"));
  }
  ASSIGN_OR_RETURN(const std::string text, ReadInput("--model-config", f.config_file));
  ASSIGN_OR_RETURN(json config, ParseUntrustedJson(text, "model_config"));
  return ModelSpecWithOverrides(f.family, std::move(config), f.overrides, f.new_overrides);
}

// --strategy: the canonical text; without "ga=", gradient accumulation
// makes up the global batch.
absl::StatusOr<Strategy> StrategyFlag(const EstimateFlags& f) {
  ASSIGN_OR_RETURN(Strategy s, ParseStrategyText(f.strategy));
  bool has_ga = false;
  for (absl::string_view part : absl::StrSplit(f.strategy, ',')) {
    has_ga = has_ga || absl::StartsWith(absl::StripLeadingAsciiWhitespace(part), "ga=");
  }
  const int64_t per_step = int64_t{s.data_parallel} * s.micro_batch_size;
  if (!has_ga && per_step > 0 && f.global_batch_size % per_step == 0) {
    s.grad_accum_steps = static_cast<int>(f.global_batch_size / per_step);
  }
  return s;
}

json LinkJson(const LinkSpec& l, const std::string& what) {
  return {{"link", what},
          {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
          {"latency_s", l.latency_s}};
}

json DeviceJson(const CatalogDevice& d) {
  return {{"name", d.name},
          {"aliases", d.aliases},
          {"description", d.description},
          {"type", d.spec.type},
          {"memory_bytes", d.spec.memory_bytes},
          {"peak_tflops",
           {{"fp32", d.spec.peak.fp32}, {"bf16", d.spec.peak.bf16}, {"fp16", d.spec.peak.fp16}}},
          {"memory_bandwidth_bytes_per_s", d.spec.memory_bandwidth_bytes_per_s},
          {"intra_node", LinkJson(d.spec.intra_node, d.intra_node_link)},
          {"inter_node", LinkJson(d.spec.inter_node, d.inter_node_link)},
          {"devices_per_node", d.spec.devices_per_node},
          {"source", d.source},
          {"node_source", d.node_source},
          {"notes", d.notes}};
}

json EstimateJson(const StrategyEstimate& e) {
  const MemoryEstimate& m = e.memory;
  json j = {{"strategy", StrategyToText(e.strategy)},
            {"strategy_json", StrategyToJson(e.strategy)},
            {"fits", e.fits},
            {"device_memory_bytes", e.device_memory_bytes},
            {"margin_bytes", e.margin_bytes},
            {"margin_fraction", e.margin_fraction},
            {"memory",
             {{"parameters", m.parameters},
              {"gradients", m.gradients},
              {"optimizer_state", m.optimizer},
              {"activations", m.activations},
              {"logits", m.logits},
              {"gathered_shards", m.gathered},
              {"overhead", m.overhead},
              {"total", m.total()}}},
            {"step_time_s", e.step_time_s},
            {"tokens_per_second", e.tokens_per_second},
            {"model_flops_per_step", e.model_flops_per_step},
            {"mfu", e.mfu}};
  if (!e.fits) j["why_not"] = e.why_not;
  return j;
}

std::string GiB(int64_t bytes) { return absl::StrFormat("%.1f", bytes / kGiB); }

void PrintDevices(const DeviceCatalog& catalog, std::ostream& out) {
  out << absl::StrFormat("%-11s %7s %9s %9s %9s %10s %10s %6s  %s\n", "DEVICE", "GiB", "BF16 TF",
                         "FP32 TF", "MEM TB/s", "NODE GB/s", "NET GB/s", "/NODE", "ALIASES");
  for (const CatalogDevice& d : catalog.devices()) {
    out << absl::StrFormat("%-11s %7s %9.1f %9.1f %9.2f %10.0f %10.1f %6d  %s\n", d.name,
                           GiB(d.spec.memory_bytes), d.spec.peak.bf16, d.spec.peak.fp32,
                           d.spec.memory_bandwidth_bytes_per_s / 1e12,
                           d.spec.intra_node.bandwidth_bytes_per_s / 1e9,
                           d.spec.inter_node.bandwidth_bytes_per_s / 1e9, d.spec.devices_per_node,
                           absl::StrJoin(d.aliases, ","));
  }
  out << "Bandwidths per device and direction; peaks dense. Sources: --json, or "
         "search/device_catalog.json.\n";
}

void PrintEstimates(const std::vector<StrategyEstimate>& estimates, std::ostream& out) {
  out << absl::StrFormat("%-3s %-4s %8s %7s %7s %7s %7s %7s %7s %7s %9s %11s %6s  %s\n", "#",
                         "FITS", "MARGIN", "PARAMS", "GRADS", "OPTIM", "ACTIV", "LOGITS", "GATHER",
                         "TOTAL", "STEP ms", "TOKENS/s", "MFU", "STRATEGY");
  int i = 0;
  for (const StrategyEstimate& e : estimates) {
    const MemoryEstimate& m = e.memory;
    out << absl::StrFormat("%-3d %-4s %8s %7s %7s %7s %7s %7s %7s %7s %9.1f %11.0f %5.1f%%  %s\n",
                           ++i, e.fits ? "yes" : "NO", GiB(e.margin_bytes), GiB(m.parameters),
                           GiB(m.gradients), GiB(m.optimizer), GiB(m.activations), GiB(m.logits),
                           GiB(m.gathered), GiB(m.total()), e.step_time_s * 1e3,
                           e.tokens_per_second, e.mfu * 100, StrategyToText(e.strategy));
    if (!e.fits) out << "    does not fit: " << e.why_not << "\n";
  }
  out << "Memory in GiB per device (worst rank); margin = device memory - total.\n";
}

int Fail(const absl::Status& s, std::ostream& err) {
  err << "autoaccel estimate: " << s.message() << "\n";
  return kExitBadInput;
}

}  // namespace

CLI::App* AddEstimateCommand(CLI::App* app, EstimateFlags* f) {
  CLI::App* cmd = app->add_subcommand(
      "estimate",
      "predict memory, step time, tokens/s and MFU of a strategy (or the best K) on a cluster "
      "from the device catalog, offline (runs nothing, needs no server)");
  cmd->add_option("--model", f->family,
                  "model family: gpt2, llama, bert, mixtral, mistral, qwen2, qwen3, phi3, gemma, "
                  "gemma2 (docs/MODELS.md)");
  cmd->add_option("--model-config", f->config_file, "Hugging Face style config.json");
  cmd->add_option("--override", f->overrides,
                  "KEY=VALUE change to a key the config has (repeatable)");
  cmd->add_option("--override-new", f->new_overrides,
                  "KEY=VALUE adding a key the config does not have (repeatable)");
  cmd->add_option("--seq-len", f->seq_len, "sequence length");
  cmd->add_option("--global-batch-size", f->global_batch_size, "samples per optimizer step");
  cmd->add_option("--world-size", f->world_size, "devices of the cluster (default 1)");
  cmd->add_option("--device", f->device, "device type from the catalog (--list-devices)");
  cmd->add_option("--devices-per-node", f->devices_per_node,
                  "devices per node (default: the catalog's, 8 for every built-in device)");
  cmd->add_option("--strategy", f->strategy,
                  "one strategy in canonical text, e.g. "
                  "dp=8,tp=1,pp=1,sharding=zero1,mbs=1,precision=bf16 (ga= defaults to what "
                  "makes up the global batch)");
  cmd->add_option("--top", f->top, "rank the whole space: the K fastest strategies that fit");
  cmd->add_option("--device-catalog", f->catalog_file,
                  "JSON catalog adding devices or replacing built-in ones (docs/CLI.md)");
  cmd->add_flag("--list-devices", f->list_devices, "print the device catalog");
  return cmd;
}

int EstimateCommand(const EstimateFlags& f, bool json_out, std::ostream& out, std::ostream& err) {
  absl::StatusOr<DeviceCatalog> catalog = Catalog(f);
  if (!catalog.ok()) return Fail(catalog.status(), err);
  if (f.list_devices) {
    if (json_out) {
      json devices = json::array();
      for (const CatalogDevice& d : catalog->devices()) devices.push_back(DeviceJson(d));
      out << json{{"devices", devices}}.dump(2) << "\n";
    } else {
      PrintDevices(*catalog, out);
    }
    return 0;
  }
  std::vector<std::string> missing;
  if (f.family.empty()) missing.push_back("--model");
  if (f.seq_len == 0) missing.push_back("--seq-len");
  if (f.global_batch_size == 0) missing.push_back("--global-batch-size");
  if (f.device.empty()) missing.push_back("--device");
  if (!missing.empty()) {
    return Fail(absl::InvalidArgumentError(
                    absl::StrCat("missing ", absl::StrJoin(missing, ", "), " (or --list-devices)")),
                err);
  }
  if (f.strategy.empty() == (f.top == 0)) {
    return Fail(absl::InvalidArgumentError("give exactly one of --strategy TEXT and --top K"), err);
  }
  absl::StatusOr<CatalogDevice> device = catalog->Get(f.device);
  if (!device.ok()) return Fail(device.status(), err);
  absl::StatusOr<ModelSpec> model = Model(f);
  if (!model.ok()) return Fail(model.status(), err);
  EstimateRequest request;
  request.model = *std::move(model);
  request.seq_len = f.seq_len;
  request.global_batch_size = f.global_batch_size;
  request.world_size = f.world_size;
  request.device = *device;
  request.devices_per_node = f.devices_per_node;
  const int per_node = f.devices_per_node > 0 ? f.devices_per_node : device->spec.devices_per_node;

  std::vector<StrategyEstimate> estimates;
  absl::StatusOr<TopEstimate> top;
  if (!f.strategy.empty()) {
    absl::StatusOr<Strategy> s = StrategyFlag(f);
    if (!s.ok()) return Fail(s.status(), err);
    absl::StatusOr<StrategyEstimate> e = EstimateStrategy(request, *s);
    if (!e.ok()) return Fail(e.status(), err);
    estimates.push_back(*std::move(e));
  } else {
    top = EstimateTop(request, f.top);
    if (!top.ok()) return Fail(top.status(), err);
    estimates = top->best;
  }

  if (json_out) {
    json doc = {
        {"device", DeviceJson(*device)},
        {"devices_per_node", per_node},
        {"world_size", f.world_size},
        {"model",
         {{"family", request.model.family}, {"parameters", request.model.ParameterCount()}}},
        {"seq_len", f.seq_len},
        {"global_batch_size", f.global_batch_size}};
    json list = json::array();
    for (const StrategyEstimate& e : estimates) list.push_back(EstimateJson(e));
    doc["strategies"] = std::move(list);
    if (top.ok() && f.strategy.empty()) {
      doc["candidates"] = top->candidates;
      doc["fitting"] = top->fitting;
      json ruled_out = json::array();
      for (const RuledOut& r : top->ruled_out) {
        ruled_out.push_back({{"kind", r.kind},
                             {"count", r.count},
                             {"example", StrategyToText(r.example)},
                             {"example_reason", r.example_reason}});
      }
      doc["ruled_out"] = std::move(ruled_out);
    }
    out << doc.dump(2) << "\n";
  } else {
    out << absl::StrFormat(
        "%s, %.2fB parameters, seq %d, global batch %d on %d x %s (%s GiB, %d a node): %s\n",
        request.model.family, request.model.ParameterCount() / 1e9, f.seq_len, f.global_batch_size,
        f.world_size, device->name, GiB(device->spec.memory_bytes), per_node,
        f.strategy.empty() ? absl::StrCat("the ", estimates.size(), " fastest that fit")
                           : "the strategy given");
    if (!estimates.empty()) PrintEstimates(estimates, out);
    if (top.ok() && f.strategy.empty()) {
      out << absl::StrFormat("%d candidates, %d fit.", top->candidates, top->fitting);
      for (const RuledOut& r : top->ruled_out) {
        out << absl::StrFormat(" Ruled out: %d %s (e.g. %s: %s).", r.count, r.kind,
                               StrategyToText(r.example), r.example_reason);
      }
      out << "\n";
    }
    out << "Predicted by the cost model's priors, not measured (docs/CLI.md, estimate).\n";
  }
  if (f.strategy.empty() && estimates.empty()) return kExitNothingRecorded;
  return 0;
}

}  // namespace autoaccel
