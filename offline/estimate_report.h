// An EstimateRequest (`autoaccel estimate`, TuningService.Estimate) answered
// by the cost model at its priors (search/estimate.h) on a device of the
// catalog, and the answer as `estimate --json` prints it. Pure; any thread.
#ifndef AUTOACCEL_OFFLINE_ESTIMATE_REPORT_H_
#define AUTOACCEL_OFFLINE_ESTIMATE_REPORT_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/autoaccel.pb.h"
#include "search/device_catalog.h"
#include "search/estimate.h"

namespace autoaccel {

struct EstimateReport {
  // The built-in catalog with the request's devices merged in.
  DeviceCatalog catalog;
  bool list_devices = false;  // only `catalog` is filled in
  EstimateRequest request;    // what was estimated (model, sizes, device)
  int devices_per_node = 0;   // the request's, else the device's
  // The strategy given, or the `top` fastest that fit.
  std::vector<StrategyEstimate> estimates;
  std::optional<TopEstimate> top;
};

// INVALID_ARGUMENT naming the field: a catalog that does not parse (named
// by device_catalog_name), missing model, seq_len, global_batch_size or
// device, neither or both of strategy and top, an unknown device, a
// TorchScript model or one without its config, a config or strategy the
// model or space refuses.
absl::StatusOr<EstimateReport> Estimate(const v1::EstimateRequest& request);

// `estimate --json`'s document: {"devices": [...]} for list_devices, else
// the device, devices_per_node, world_size, model {family, parameters},
// seq_len, global_batch_size, strategies [...] and, for top, candidates,
// fitting and ruled_out.
nlohmann::json EstimateReportJson(const EstimateReport& report);

}  // namespace autoaccel

#endif  // AUTOACCEL_OFFLINE_ESTIMATE_REPORT_H_
