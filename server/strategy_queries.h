// Questions to the strategy database: the best answer stored for a
// signature (model, sequence length, global batch, world size, device
// type), or the most recent answers.
//
// Reads the store only; any thread.
#ifndef AUTOACCEL_SERVER_STRATEGY_QUERIES_H_
#define AUTOACCEL_SERVER_STRATEGY_QUERIES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/autoaccel.pb.h"
#include "server/store.h"

namespace autoaccel {

// With no model: the 100 most recently updated answers. With a model: the
// answer for its signature, if any (world size 0 means 1, device type ""
// means cpu). INVALID_ARGUMENT naming the field for a bad model, sequence
// length or batch; the store's errors; DATA_LOSS for a stored answer that
// does not parse.
absl::StatusOr<std::vector<v1::StrategyAnswer>> QueryStrategies(
    Store* store, const v1::QueryStrategiesRequest& request);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_STRATEGY_QUERIES_H_
