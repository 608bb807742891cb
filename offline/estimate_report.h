// An EstimateRequest (`autoaccel estimate`, TuningService.Estimate) answered
// by the cost model at its priors (search/estimate.h) on a device of the
// catalog, and the answer as `estimate --json` prints it. Pure; any thread.
#ifndef AUTOACCEL_OFFLINE_ESTIMATE_REPORT_H_
#define AUTOACCEL_OFFLINE_ESTIMATE_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/training_cost.h"
#include "nlohmann/json.hpp"
#include "proto/autoaccel.pb.h"
#include "search/device_catalog.h"
#include "search/estimate.h"

namespace autoaccel {

// One cluster of a sweep: a device type and a world size, its fastest
// option and its safe pick, each with its time and cost to train.
struct ClusterEstimate {
  CatalogDevice device;
  int world_size = 0;
  int devices_per_node = 0;
  // Empty when the space has no candidate for this cluster (e.g. a batch
  // the world size does not divide): `error` says why.
  std::optional<TopEstimate> top;
  std::string error;
  std::optional<TrainingCost> fastest_cost;  // of top->best[0], with tokens
  std::optional<TrainingCost> safe_cost;     // of top->safe, with tokens
};

// A cluster chosen for a deadline or a budget.
struct ClusterPick {
  enum class Rule { kDeadline, kBudget } rule = Rule::kDeadline;
  double limit = 0;            // deadline in days, or the budget
  std::optional<size_t> pick;  // index into clusters; none: nothing meets it
};

struct EstimateReport {
  // The built-in catalog with the request's devices merged in.
  DeviceCatalog catalog;
  bool list_devices = false;  // only `catalog` is filled in
  EstimateRequest request;    // what was estimated (model, sizes, device; the first cluster's)
  int devices_per_node = 0;   // the request's, else the device's
  // The strategy given, or the `top` options that fit (one cluster).
  std::vector<StrategyEstimate> estimates;
  std::optional<TopEstimate> top;
  // Time and cost to train: the tokens (0: none asked), and for one cluster
  // each of `estimates`' (same order) and the safe pick's.
  int64_t tokens = 0;
  std::vector<TrainingCost> estimate_costs;
  std::optional<TrainingCost> safe_cost;
  // A sweep (several world sizes or devices, or a deadline or budget):
  // every combination, devices in the order given, then world sizes.
  bool sweep = false;
  std::vector<ClusterEstimate> clusters;
  std::optional<ClusterPick> choice;
};

// INVALID_ARGUMENT naming the field: a catalog that does not parse (named
// by device_catalog_name), missing model, seq_len, global_batch_size or
// device, neither or both of strategy and top (one cluster), a strategy
// with a sweep, both device and devices or world_size and world_sizes, an
// unknown device, a TorchScript model or one without its config, a config
// or strategy the model or space refuses (one cluster; in a sweep the
// cluster's `error` says it), tokens < 0, a price < 0, deadline or budget
// without tokens, both of them, or one < 0, a safe_margin outside [0, 1),
// a deadline or budget with a cluster that has no price.
absl::StatusOr<EstimateReport> Estimate(const v1::EstimateRequest& request);

// `estimate --json`'s document: {"devices": [...]} for list_devices, else
// the device, devices_per_node, world_size, model {family, parameters},
// seq_len, global_batch_size, strategies [...] and, for top, candidates,
// fitting, groups, ruled_out and safe; with tokens, each strategy's
// "training" {days, days_fast, days_slow, cost...} and "training_band"; a
// sweep instead: model, seq_len, global_batch_size, clusters [...] and
// "choice" (docs/CLI.md, "Time and cost to train").
nlohmann::json EstimateReportJson(const EstimateReport& report);

}  // namespace autoaccel

#endif  // AUTOACCEL_OFFLINE_ESTIMATE_REPORT_H_
