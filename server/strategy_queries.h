// Questions to the strategy database: the best answer stored for a
// signature (model, sequence length, global batch, world size, device
// type), or the stored answers with their provenance (the job that found
// each, when, the engine version that measured it, its figures).
//
// Reads the store only; any thread.
#ifndef AUTOACCEL_SERVER_STRATEGY_QUERIES_H_
#define AUTOACCEL_SERVER_STRATEGY_QUERIES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/autoaccel.pb.h"
#include "server/store/store.h"

namespace autoaccel {

// With no model: the 100 most recently updated answers. With a model: the
// answer for its signature, if any (world size 0 means 1, device type ""
// means cpu). INVALID_ARGUMENT naming the field for a bad model, sequence
// length or batch; the store's errors; DATA_LOSS for a stored answer that
// does not parse.
absl::StatusOr<std::vector<v1::StrategyAnswer>> QueryStrategies(
    Store* store, const v1::QueryStrategiesRequest& request);

// The stored answers the request's filters match, most recently stored
// first: `limit` of them (0: 100, at most 1000). Answers of every engine
// version are listed, each saying its own. INVALID_ARGUMENT naming the field
// for an unknown model family or device type or a limit out of range; the
// store's errors; DATA_LOSS for a stored answer that does not parse.
absl::StatusOr<std::vector<v1::StrategyAnswer>> ListStrategies(
    Store* store, const v1::ListStrategiesRequest& request);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_STRATEGY_QUERIES_H_
