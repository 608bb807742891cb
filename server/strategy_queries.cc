#include "server/strategy_queries.h"

#include "common/status_macros.h"
#include "server/job_view.h"
#include "server/signature.h"
#include "server/tune_request.h"

namespace autoaccel {
namespace {

constexpr int kRecentAnswers = 100;

}  // namespace

absl::StatusOr<std::vector<v1::StrategyAnswer>> QueryStrategies(
    Store* store, const v1::QueryStrategiesRequest& q) {
  std::vector<StrategyRecord> records;
  if (q.model().family().empty() && q.model().config_json().empty()) {
    ASSIGN_OR_RETURN(records, store->ListStrategies(kRecentAnswers));
  } else {
    ASSIGN_OR_RETURN(ModelSpec model, ModelFromRequest(q.model()));
    if (q.seq_len() <= 0) return absl::InvalidArgumentError("seq_len: must be positive");
    if (q.global_batch_size() <= 0) {
      return absl::InvalidArgumentError("global_batch_size: must be positive");
    }
    const int world = q.world_size() > 0 ? q.world_size() : 1;
    const std::string device = q.device_type().empty() ? "cpu" : q.device_type();
    ASSIGN_OR_RETURN(std::optional<StrategyRecord> found,
                     store->GetStrategy(ComputeSignature(model, q.seq_len(), q.global_batch_size(),
                                                         world, device)));
    if (found) records.push_back(*found);
  }
  std::vector<v1::StrategyAnswer> answers;
  for (const StrategyRecord& r : records) {
    ASSIGN_OR_RETURN(v1::StrategyAnswer a, StrategyAnswerToProto(r));
    answers.push_back(std::move(a));
  }
  return answers;
}

}  // namespace autoaccel
