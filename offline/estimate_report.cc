#include "offline/estimate_report.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "proto/convert.h"

namespace autoaccel {
namespace {

using nlohmann::json;

// The model to estimate: one a config describes (ModelOfSpec), never
// TorchScript's, whose shape is unknown.
absl::StatusOr<ModelSpec> Model(const v1::ModelSpec& m) {
  if (m.family() == "torchscript") {
    return absl::InvalidArgumentError(
        "model.family torchscript: a TorchScript module's shape is unknown, so it cannot be "
        "estimated; give its Hugging Face family and config.json");
  }
  ASSIGN_OR_RETURN(std::optional<ModelSpec> model, ModelOfSpec(m));
  if (!model) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.config_json: the model ", m.family(), " needs its config.json"));
  }
  return *std::move(model);
}

// The strategy text; without "ga=", gradient accumulation makes up the
// global batch.
absl::StatusOr<Strategy> StrategyOf(const std::string& text, int global_batch_size) {
  ASSIGN_OR_RETURN(Strategy s, ParseStrategyText(text));
  bool has_ga = false;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    has_ga = has_ga || absl::StartsWith(absl::StripLeadingAsciiWhitespace(part), "ga=");
  }
  const int64_t per_step = int64_t{s.data_parallel} * s.micro_batch_size;
  if (!has_ga && per_step > 0 && global_batch_size % per_step == 0) {
    s.grad_accum_steps = static_cast<int>(global_batch_size / per_step);
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
          {"peak_tflops", PeakTflopsToJson(d.spec.peak)},
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
              {"fp8_weight_copies", m.fp8_weights},
              {"overhead", m.overhead},
              {"total", m.total()}}},
            {"step_time_s", e.step_time_s},
            {"tokens_per_second", e.tokens_per_second},
            {"model_flops_per_step", e.model_flops_per_step},
            {"mfu", e.mfu},
            {"communication",
             {{"data_parallel_bytes", e.data_parallel_bytes},
              {"model_parallel_bytes", e.model_parallel_bytes},
              {"tensor_parallel_bytes", e.model_parallel.tensor},
              {"context_parallel_bytes", e.model_parallel.context},
              {"expert_parallel_bytes", e.model_parallel.expert},
              {"pipeline_parallel_bytes", e.model_parallel.pipeline}}}};
  if (!e.fits) j["why_not"] = e.why_not;
  return j;
}

}  // namespace

absl::StatusOr<EstimateReport> Estimate(const v1::EstimateRequest& r) {
  EstimateReport report;
  ASSIGN_OR_RETURN(report.catalog, DeviceCatalog::BuiltIn());
  if (!r.device_catalog_json().empty()) {
    ASSIGN_OR_RETURN(const DeviceCatalog user,
                     DeviceCatalog::Parse(r.device_catalog_json(), r.device_catalog_name().empty()
                                                                       ? "device_catalog"
                                                                       : r.device_catalog_name()));
    report.catalog.Merge(user);
  }
  if (r.list_devices()) {
    report.list_devices = true;
    return report;
  }
  std::vector<std::string> missing;
  if (r.model().family().empty()) missing.push_back("model");
  if (r.seq_len() == 0) missing.push_back("seq_len");
  if (r.global_batch_size() == 0) missing.push_back("global_batch_size");
  if (r.device().empty()) missing.push_back("device");
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing ", absl::StrJoin(missing, ", "), " (or list_devices)"));
  }
  if (r.strategy().empty() == (r.top() == 0)) {
    return absl::InvalidArgumentError("give exactly one of a strategy's text and top K");
  }
  absl::StatusOr<CatalogDevice> device = report.catalog.Get(r.device());
  if (!device.ok()) {  // the request's bad input, not a missing resource
    return absl::InvalidArgumentError(absl::StrCat("device: ", device.status().message()));
  }
  report.request.device = *std::move(device);
  ASSIGN_OR_RETURN(report.request.model, Model(r.model()));
  report.request.seq_len = r.seq_len();
  report.request.global_batch_size = r.global_batch_size();
  report.request.world_size = r.world_size() > 0 ? r.world_size() : 1;
  report.request.devices_per_node = r.devices_per_node();
  report.devices_per_node =
      r.devices_per_node() > 0 ? r.devices_per_node() : report.request.device.spec.devices_per_node;
  if (!r.precisions().empty() && r.top() == 0) {
    return absl::InvalidArgumentError(
        "precisions: only with top K (a strategy's text names its own precision)");
  }
  for (const std::string& name : r.precisions()) {
    ASSIGN_OR_RETURN(const Precision p, ParsePrecision(name));
    report.request.precisions.push_back(p);
  }
  if (!r.strategy().empty()) {
    ASSIGN_OR_RETURN(const Strategy s, StrategyOf(r.strategy(), r.global_batch_size()));
    ASSIGN_OR_RETURN(StrategyEstimate e, EstimateStrategy(report.request, s));
    report.estimates.push_back(std::move(e));
  } else {
    ASSIGN_OR_RETURN(report.top, EstimateTop(report.request, r.top()));
    report.estimates = report.top->best;
  }
  return report;
}

json EstimateReportJson(const EstimateReport& report) {
  if (report.list_devices) {
    json devices = json::array();
    for (const CatalogDevice& d : report.catalog.devices()) devices.push_back(DeviceJson(d));
    return json{{"devices", std::move(devices)}};
  }
  const EstimateRequest& r = report.request;
  json doc = {{"device", DeviceJson(r.device)},
              {"devices_per_node", report.devices_per_node},
              {"world_size", r.world_size},
              {"model", {{"family", r.model.family}, {"parameters", r.model.ParameterCount()}}},
              {"seq_len", r.seq_len},
              {"global_batch_size", r.global_batch_size}};
  json list = json::array();
  for (const StrategyEstimate& e : report.estimates) list.push_back(EstimateJson(e));
  doc["strategies"] = std::move(list);
  if (report.top) {
    doc["candidates"] = report.top->candidates;
    doc["fitting"] = report.top->fitting;
    json ruled_out = json::array();
    for (const RuledOut& o : report.top->ruled_out) {
      ruled_out.push_back({{"kind", o.kind},
                           {"count", o.count},
                           {"example", StrategyToText(o.example)},
                           {"example_reason", o.example_reason}});
    }
    doc["ruled_out"] = std::move(ruled_out);
  }
  return doc;
}

}  // namespace autoaccel
