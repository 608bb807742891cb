#include "offline/estimate_report.h"

#include <algorithm>
#include <cmath>
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
          {"notes", d.notes},
          {"price_per_gpu_hour",
           d.price_per_gpu_hour > 0 ? json(d.price_per_gpu_hour) : json(nullptr)}};
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

json CostJson(const TrainingCost& c) {
  json j = {{"days", c.days}, {"days_fast", c.days_fast}, {"days_slow", c.days_slow}};
  if (c.priced) {
    j["price_per_gpu_hour"] = c.price_per_gpu_hour;
    j["cost"] = c.cost;
    j["cost_low"] = c.cost_low;
    j["cost_high"] = c.cost_high;
  }
  return j;
}

json WithCost(json j, const std::optional<TrainingCost>& cost) {
  if (cost) j["training"] = CostJson(*cost);
  return j;
}

json BandJson() { return {{"fraction", kStepTimeBand}, {"source", kStepTimeBandSource}}; }

absl::StatusOr<CatalogDevice> DeviceNamed(const DeviceCatalog& catalog, const std::string& name) {
  absl::StatusOr<CatalogDevice> device = catalog.Get(name);
  if (!device.ok()) {  // the request's bad input, not a missing resource
    return absl::InvalidArgumentError(absl::StrCat("device: ", device.status().message()));
  }
  return device;
}

// The price per device-hour for `d`: the request's, else the catalog's (0:
// none known).
double PriceFor(const v1::EstimateRequest& r, const CatalogDevice& d) {
  return r.price_per_gpu_hour() > 0 ? r.price_per_gpu_hour() : d.price_per_gpu_hour;
}

absl::Status CheckCostInputs(const v1::EstimateRequest& r) {
  if (r.tokens() < 0) return absl::InvalidArgumentError("tokens: must be > 0 (0: no time or cost)");
  if (!std::isfinite(r.price_per_gpu_hour()) || r.price_per_gpu_hour() < 0) {
    return absl::InvalidArgumentError("price_per_gpu_hour: must be a number > 0");
  }
  for (const auto& [field, value] :
       {std::pair{"deadline_seconds", r.deadline_seconds()}, std::pair{"budget", r.budget()}}) {
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": must be a number > 0"));
    }
    if (value > 0 && r.tokens() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": needs tokens (the tokens to train on)"));
    }
  }
  if (r.deadline_seconds() > 0 && r.budget() > 0) {
    return absl::InvalidArgumentError(
        "deadline_seconds and budget: give one (the cheapest that meets a deadline, or the "
        "fastest within a budget)");
  }
  if (r.has_safe_margin() && !(r.safe_margin() >= 0 && r.safe_margin() < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("safe_margin: a fraction of device memory in [0, 1), got ", r.safe_margin()));
  }
  for (int w : r.world_sizes()) {
    if (w < 1) return absl::InvalidArgumentError(absl::StrCat("world_sizes: ", w, " is not >= 1"));
  }
  if (!r.world_sizes().empty() && r.world_size() != 0) {
    return absl::InvalidArgumentError("world_size and world_sizes: give one");
  }
  if (!r.devices().empty() && !r.device().empty()) {
    return absl::InvalidArgumentError("device and devices: give one");
  }
  return absl::OkStatus();
}

// The clusters of a sweep, each answered by its top options and safe pick.
absl::Status Sweep(const v1::EstimateRequest& r, const EstimateRequest& base,
                   EstimateReport& report) {
  std::vector<int> sizes(r.world_sizes().begin(), r.world_sizes().end());
  if (sizes.empty()) sizes.push_back(r.world_size() > 0 ? r.world_size() : 1);
  std::vector<std::string> names(r.devices().begin(), r.devices().end());
  if (names.empty()) names.push_back(r.device());
  std::vector<ClusterChoice> choices;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(const CatalogDevice device, DeviceNamed(report.catalog, name));
    const double price = PriceFor(r, device);
    if ((r.deadline_seconds() > 0 || r.budget() > 0) && price <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "price_per_gpu_hour: the device \"", device.name,
          "\" has no price in the catalog; give price_per_gpu_hour to choose by cost"));
    }
    for (int world_size : sizes) {
      ClusterEstimate c;
      c.device = device;
      c.world_size = world_size;
      c.devices_per_node =
          base.devices_per_node > 0 ? base.devices_per_node : device.spec.devices_per_node;
      EstimateRequest one = base;
      one.device = device;
      one.world_size = world_size;
      absl::StatusOr<TopEstimate> top = EstimateTop(one, std::max(r.top(), 1));
      if (top.ok()) {
        c.top = *std::move(top);
      } else if (top.status().code() == absl::StatusCode::kInvalidArgument) {
        c.error = std::string(top.status().message());
      } else {
        return top.status();
      }
      if (r.tokens() > 0 && c.top && !c.top->best.empty()) {
        c.fastest_cost =
            TrainingCostOf(c.top->best[0].tokens_per_second, r.tokens(), world_size, price);
      }
      if (r.tokens() > 0 && c.top && c.top->safe) {
        c.safe_cost = TrainingCostOf(c.top->safe->tokens_per_second, r.tokens(), world_size, price);
      }
      // A choice trains with the cluster's safe pick.
      choices.push_back({c.safe_cost});
      report.clusters.push_back(std::move(c));
    }
  }
  if (r.deadline_seconds() > 0) {
    ClusterPick pick{ClusterPick::Rule::kDeadline, r.deadline_seconds() / 86400, std::nullopt};
    pick.pick = CheapestMeetingDeadline(choices, pick.limit);
    report.choice = pick;
  } else if (r.budget() > 0) {
    ClusterPick pick{ClusterPick::Rule::kBudget, r.budget(), std::nullopt};
    pick.pick = FastestWithinBudget(choices, pick.limit);
    report.choice = pick;
  }
  return absl::OkStatus();
}

json ClusterJson(const ClusterEstimate& c) {
  json j = {{"device", c.device.name},
            {"world_size", c.world_size},
            {"devices_per_node", c.devices_per_node}};
  if (!c.error.empty()) j["error"] = c.error;
  if (!c.top) return j;
  j["candidates"] = c.top->candidates;
  j["fitting"] = c.top->fitting;
  j["groups"] = c.top->groups;
  j["fastest"] =
      c.top->best.empty() ? json(nullptr) : WithCost(EstimateJson(c.top->best[0]), c.fastest_cost);
  j["safe"] = c.top->safe ? WithCost(EstimateJson(*c.top->safe), c.safe_cost) : json(nullptr);
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
  if (r.device().empty() && r.devices().empty()) missing.push_back("device");
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing ", absl::StrJoin(missing, ", "), " (or list_devices)"));
  }
  RETURN_IF_ERROR(CheckCostInputs(r));
  report.sweep = r.devices_size() > 1 || r.world_sizes_size() > 1 || r.deadline_seconds() > 0 ||
                 r.budget() > 0;
  if (report.sweep && !r.strategy().empty()) {
    return absl::InvalidArgumentError(
        "strategy: a strategy fixes one device and world size; a sweep over clusters (several "
        "devices or world sizes, a deadline or a budget) ranks each cluster's own (top)");
  }
  if (!report.sweep && r.strategy().empty() == (r.top() == 0)) {
    return absl::InvalidArgumentError("give exactly one of a strategy's text and top K");
  }
  if (r.top() < 0) return absl::InvalidArgumentError("top: must be >= 1");
  const std::string first_device = r.devices().empty() ? r.device() : r.devices(0);
  ASSIGN_OR_RETURN(report.request.device, DeviceNamed(report.catalog, first_device));
  ASSIGN_OR_RETURN(report.request.model, Model(r.model()));
  report.request.seq_len = r.seq_len();
  report.request.global_batch_size = r.global_batch_size();
  report.request.world_size = !r.world_sizes().empty() ? r.world_sizes(0)
                              : r.world_size() > 0     ? r.world_size()
                                                       : 1;
  report.request.devices_per_node = r.devices_per_node();
  if (r.has_safe_margin()) report.request.safe_margin = r.safe_margin();
  report.devices_per_node =
      r.devices_per_node() > 0 ? r.devices_per_node() : report.request.device.spec.devices_per_node;
  report.tokens = r.tokens();
  if (!r.precisions().empty() && r.top() == 0 && !report.sweep) {
    return absl::InvalidArgumentError(
        "precisions: only with top K (a strategy's text names its own precision)");
  }
  for (const std::string& name : r.precisions()) {
    ASSIGN_OR_RETURN(const Precision p, ParsePrecision(name));
    report.request.precisions.push_back(p);
  }
  if (report.sweep) {
    RETURN_IF_ERROR(Sweep(r, report.request, report));
    return report;
  }
  if (!r.strategy().empty()) {
    ASSIGN_OR_RETURN(const Strategy s, StrategyOf(r.strategy(), r.global_batch_size()));
    ASSIGN_OR_RETURN(StrategyEstimate e, EstimateStrategy(report.request, s));
    report.estimates.push_back(std::move(e));
  } else {
    ASSIGN_OR_RETURN(report.top, EstimateTop(report.request, r.top()));
    report.estimates = report.top->best;
  }
  if (r.tokens() > 0) {
    const double price = PriceFor(r, report.request.device);
    const auto cost = [&](const StrategyEstimate& e) {
      return TrainingCostOf(e.tokens_per_second, r.tokens(), report.request.world_size, price);
    };
    for (const StrategyEstimate& e : report.estimates) report.estimate_costs.push_back(cost(e));
    if (report.top && report.top->safe) report.safe_cost = cost(*report.top->safe);
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
  const json model = {{"family", r.model.family}, {"parameters", r.model.ParameterCount()}};
  json doc;
  if (report.sweep) {
    doc = {{"model", model},
           {"seq_len", r.seq_len},
           {"global_batch_size", r.global_batch_size},
           {"safe_margin", r.safe_margin}};
    json clusters = json::array();
    for (const ClusterEstimate& c : report.clusters) clusters.push_back(ClusterJson(c));
    doc["clusters"] = std::move(clusters);
    if (report.choice) {
      const ClusterPick& p = *report.choice;
      const bool deadline = p.rule == ClusterPick::Rule::kDeadline;
      doc["choice"] = {{"rule", deadline ? "cheapest meeting the deadline (slow end)"
                                         : "fastest within the budget (high end)"},
                       {deadline ? "deadline_days" : "budget", p.limit},
                       {"cluster", p.pick ? json(*p.pick) : json(nullptr)}};
    }
  } else {
    doc = {{"device", DeviceJson(r.device)}, {"devices_per_node", report.devices_per_node},
           {"world_size", r.world_size},     {"model", model},
           {"seq_len", r.seq_len},           {"global_batch_size", r.global_batch_size}};
    json list = json::array();
    for (size_t i = 0; i < report.estimates.size(); ++i) {
      list.push_back(WithCost(EstimateJson(report.estimates[i]),
                              i < report.estimate_costs.size()
                                  ? std::optional<TrainingCost>(report.estimate_costs[i])
                                  : std::nullopt));
    }
    doc["strategies"] = std::move(list);
  }
  if (report.top) {
    doc["candidates"] = report.top->candidates;
    doc["fitting"] = report.top->fitting;
    doc["groups"] = report.top->groups;
    doc["safe_margin"] = r.safe_margin;
    doc["safe"] = report.top->safe ? WithCost(EstimateJson(*report.top->safe), report.safe_cost)
                                   : json(nullptr);
    json ruled_out = json::array();
    for (const RuledOut& o : report.top->ruled_out) {
      ruled_out.push_back({{"kind", o.kind},
                           {"count", o.count},
                           {"example", StrategyToText(o.example)},
                           {"example_reason", o.example_reason}});
    }
    doc["ruled_out"] = std::move(ruled_out);
  }
  if (report.tokens > 0) {
    doc["tokens"] = report.tokens;
    doc["training_band"] = BandJson();
  }
  return doc;
}

}  // namespace autoaccel
