// A tuning request, checked: every field within its bounds, the model read
// from its config, the search space enumerated and narrowed, defaults filled
// in. Pure: no store, no workers; any thread.
#ifndef AUTOACCEL_SERVER_TUNE_REQUEST_H_
#define AUTOACCEL_SERVER_TUNE_REQUEST_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"
#include "search/model_spec.h"
#include "search/partial_strategy.h"
#include "search/searcher.h"
#include "search/strategy.h"

namespace autoaccel {

// What a request that leaves a field at 0 gets.
struct TuneDefaults {
  int warmup_steps = 2;
  int measured_steps = 5;
  absl::Duration trial_timeout = absl::Minutes(10);
  double min_measured_seconds = 1.0;
};

struct ValidatedRequest {
  v1::TuneRequest request;  // with defaults filled in
  ModelSpec model;
  std::vector<Strategy> space;  // compatible, and allowed by include / exclude
  SearchAlgorithm algorithm = SearchAlgorithm::kAuto;
  std::optional<PartialStrategy> load;  // load_strategy
};

// INVALID_ARGUMENT naming the field for anything wrong, checked before any
// costly work: every number finite and within its bound (time limit at most
// 30 days, trial timeout at most a day, warm-up and measured steps at most
// 10,000 each, world size at most 65,536, ...), every string at most 16 KiB
// and every list at most 256 entries (the config at most 256 KiB, nested at
// most 64 deep), and a space of at most 250,000 combinations.
absl::StatusOr<ValidatedRequest> ValidateTuneRequest(const v1::TuneRequest& request,
                                                     const TuneDefaults& defaults);

// The model a request describes: its config.json with the overrides applied
// (torchscript: the file's digest and input spec). INVALID_ARGUMENT naming
// the field.
absl::StatusOr<ModelSpec> ModelFromRequest(const v1::ModelSpec& model);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_TUNE_REQUEST_H_
