#include "search/starting_point.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace autoaccel {

absl::StatusOr<Strategy> ChooseStartingPoint(const PartialStrategy& load,
                                             const std::vector<Strategy>& space,
                                             const CostModel& model, double memory_margin) {
  const Strategy* pick = nullptr;
  double pick_tps = -1;
  int64_t pick_memory = 0;
  bool pick_fits = false;
  for (const Strategy& s : space) {
    if (!load.Matches(s)) continue;
    const bool fits = model.Fits(s, memory_margin, nullptr);
    const CostModel::Prediction p = model.Predict(s);
    const bool better = pick == nullptr || (fits && !pick_fits) ||
                        (fits == pick_fits &&
                         (fits ? p.tokens_per_second > pick_tps : p.memory.total() < pick_memory));
    if (better) {
      pick = &s;
      pick_tps = p.tokens_per_second;
      pick_memory = p.memory.total();
      pick_fits = fits;
    }
  }
  if (pick == nullptr) return absl::InvalidArgumentError("load_strategy: no candidate matches");
  return *pick;
}

absl::StatusOr<std::string> SetUpLoadedSearch(const PartialStrategy& load, bool finetune,
                                              const std::vector<Strategy>& space,
                                              SearchSetup* setup) {
  ASSIGN_OR_RETURN(const Strategy start,
                   ChooseStartingPoint(load, space, *setup->cost_model, setup->memory_margin));
  setup->candidates.clear();
  if (finetune) {
    // The neighbourhood: every candidate at most two dimensions away.
    for (const Strategy& s : space) {
      if (StrategyDistance(s, start) <= 2) setup->candidates.push_back(s);
    }
    setup->algorithm = SearchAlgorithm::kGreedy;
    setup->start = start;
    return absl::StrFormat("finetune: greedy from %s over %d neighbours", StrategyToText(start),
                           setup->candidates.size() - 1);
  }
  // Run as loaded: the trial is what confirms whether it fits.
  setup->candidates = {start};
  setup->algorithm = SearchAlgorithm::kExhaustive;
  setup->memory_margin = std::numeric_limits<double>::infinity();
  return absl::StrCat("load_strategy: runs ", StrategyToText(start), " once");
}

}  // namespace autoaccel
