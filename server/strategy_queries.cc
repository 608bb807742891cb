#include "server/strategy_queries.h"

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/job_view.h"
#include "server/signature.h"
#include "server/tune_request.h"

namespace autoaccel {
namespace {

constexpr int kRecentAnswers = 100;
constexpr int kMaxAnswersListed = 1000;

absl::StatusOr<std::vector<v1::StrategyAnswer>> ToProtos(
    const std::vector<StrategyRecord>& records) {
  std::vector<v1::StrategyAnswer> answers;
  for (const StrategyRecord& r : records) {
    ASSIGN_OR_RETURN(v1::StrategyAnswer a, StrategyAnswerToProto(r));
    answers.push_back(std::move(a));
  }
  return answers;
}

}  // namespace

absl::StatusOr<std::vector<v1::StrategyAnswer>> QueryStrategies(
    Store* store, const v1::QueryStrategiesRequest& q) {
  std::vector<StrategyRecord> records;
  if (q.model().family().empty() && q.model().config_json().empty()) {
    ASSIGN_OR_RETURN(records, store->ListStrategies(StrategyFilter(), kRecentAnswers));
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
  return ToProtos(records);
}

absl::StatusOr<std::vector<v1::StrategyAnswer>> ListStrategies(
    Store* store, const v1::ListStrategiesRequest& request) {
  const std::vector<std::string>& families = KnownModelFamilies();
  // A family, or a launcher job's name as `strategies` prints it
  // ("launcher:NAME" or "launcher:NAME:FAMILY").
  const bool launcher =
      absl::StartsWith(request.model_family(), "launcher:") && request.model_family().size() > 9;
  if (!request.model_family().empty() && !launcher &&
      std::find(families.begin(), families.end(), request.model_family()) == families.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model_family: unknown '", request.model_family(),
        "' (allowed: ", absl::StrJoin(families, ", "), ", or launcher:NAME as listed)"));
  }
  if (!request.device_type().empty() && request.device_type() != "cpu" &&
      request.device_type() != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("device_type: unknown '", request.device_type(), "' (allowed: cpu, cuda)"));
  }
  if (request.limit() < 0 || request.limit() > kMaxAnswersListed) {
    return absl::InvalidArgumentError(absl::StrCat("limit: must be between 0 and ",
                                                   kMaxAnswersListed, ", got ", request.limit()));
  }
  StrategyFilter filter;
  filter.model_family = request.model_family();
  filter.device_type = request.device_type();
  ASSIGN_OR_RETURN(
      std::vector<StrategyRecord> records,
      store->ListStrategies(filter, request.limit() == 0 ? kRecentAnswers : request.limit()));
  return ToProtos(records);
}

}  // namespace autoaccel
