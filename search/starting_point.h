// Where a search with a loaded strategy starts (--load-strategy, with or
// without --finetune).
//
// A loaded strategy may leave dimensions open ("precision=bf16" alone); they
// are filled with the cost model's best guess: the fastest predicted
// candidate that matches and fits, else the matching candidate that needs
// the least memory. Without finetune that one strategy runs once (the trial,
// not the model, says whether it fits); with finetune a greedy search starts
// from it over every candidate at most two dimensions away.
//
// Pure: no I/O; any thread.
#ifndef AUTOACCEL_SEARCH_STARTING_POINT_H_
#define AUTOACCEL_SEARCH_STARTING_POINT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/cost_model.h"
#include "search/searcher.h"
#include "spec/partial_strategy.h"
#include "spec/strategy.h"

namespace autoaccel {

// The candidate of `space` the loaded strategy `load` starts from (see
// above); `memory_margin` as SearchSetup's. INVALID_ARGUMENT
// ("load_strategy: ...") when no candidate matches.
absl::StatusOr<Strategy> ChooseStartingPoint(const PartialStrategy& load,
                                             const std::vector<Strategy>& space,
                                             const CostModel& model, double memory_margin);

// Sets `setup`'s candidates, algorithm, start and memory margin for a job
// that loads `load` (REQUIRES: setup->cost_model is set) and returns how the
// job searches, for people ("finetune: greedy from ... over N neighbours").
// Errors as ChooseStartingPoint's.
absl::StatusOr<std::string> SetUpLoadedSearch(const PartialStrategy& load, bool finetune,
                                              const std::vector<Strategy>& space,
                                              SearchSetup* setup);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_STARTING_POINT_H_
