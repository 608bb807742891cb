// The machinery every search algorithm shares (search/searcher.h): the
// candidates with their predictions, pruning, the budget and the answer.
// Internal to the search library.
#ifndef AUTOACCEL_SEARCH_SEARCHER_INTERNAL_H_
#define AUTOACCEL_SEARCH_SEARCHER_INTERNAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "search/failure_memory.h"
#include "search/searcher.h"

namespace autoaccel::search_internal {

class CandidateSearcher : public Searcher {
 public:
  // REQUIRES: setup checked by CreateSearcher (candidates unique, sizes
  // positive).
  explicit CandidateSearcher(SearchSetup setup);

  std::optional<Proposal> Next() final;
  std::vector<PrunedStrategy> TakePruned() final;
  void Report(const ScoredTrial& trial) final;
  void Resume(const std::vector<ResumedTrial>& trials) final;
  bool Finished() const final;
  std::optional<ScoredTrial> Best() const override;
  std::string Describe() const final { return description_; }
  const CostModel* cost_model() const final {
    return setup_.cost_model ? &*setup_.cost_model : nullptr;
  }
  void set_description(std::string d) { description_ = std::move(d); }

 protected:
  enum class State {
    kOpen,     // never proposed
    kRunning,  // proposed, not reported
    kDone,     // reported (any terminal status)
    kPruned,   // decided never to run
  };
  struct Candidate {
    Strategy strategy;
    State state = State::kOpen;
    // Calibrated cost-model throughput; 0 when there is no model (or it
    // knows nothing of the model's shape).
    double predicted_tokens_per_second = 0;
    std::optional<ScoredTrial> result;  // the latest reported trial
    int proposals = 0;
  };

  // The algorithm's choice among the candidates, or nullopt to wait for
  // trials in flight (or when nothing is left: see Exhausted()). Called only
  // within the budget. The base marks the chosen candidate kRunning.
  virtual std::optional<Proposal> Choose() = 0;
  // True when Choose() will never propose again, whatever is reported. The
  // default: no open candidate left.
  virtual bool Exhausted() const;
  // Called after a trial of candidate `index` was recorded (and the cost
  // model calibrated, predictions refreshed, dominated candidates pruned).
  virtual void OnReport(int index, const ScoredTrial& trial) { (void)index, (void)trial; }
  // Called at the end of Resume(), once every resumed trial is marked
  // proposed and the ended ones reported: the algorithm takes up its own
  // state from them (`trials` as given to Resume).
  virtual void OnResume(const std::vector<ResumedTrial>& trials) { (void)trials; }

  // Open candidates, best predicted first (ties: the space's order).
  std::vector<int> OpenByPrediction() const;
  int IndexOf(const Strategy& s) const;  // -1 when not a candidate
  bool HasModel() const { return setup_.cost_model.has_value(); }
  void Prune(int index, std::string reason);

  SearchSetup setup_;
  const Clock* clock_;
  std::vector<Candidate> candidates_;
  std::vector<ScoredTrial> reported_;  // every report, in order
  int running_ = 0;

 private:
  // Recomputes every open candidate's prediction from the (re)calibrated
  // model and prunes those that no longer fit.
  void RefreshPredictions();
  bool BudgetSpent() const;

  std::string description_;
  std::map<std::string, int> index_;  // canonical text -> candidate
  std::vector<PrunedStrategy> pruned_;
  FailureMemory failures_;
  int proposed_ = 0;
  // CostModel::fits() when the predictions were last computed.
  std::optional<uint64_t> refreshed_at_fit_;
};

// The algorithms (search/searcher.cc, search/bayes.cc).
std::unique_ptr<Searcher> NewExhaustiveSearcher(SearchSetup setup);
std::unique_ptr<Searcher> NewGreedySearcher(SearchSetup setup);
std::unique_ptr<Searcher> NewBayesSearcher(SearchSetup setup);
std::unique_ptr<Searcher> NewHalvingSearcher(SearchSetup setup);

}  // namespace autoaccel::search_internal

#endif  // AUTOACCEL_SEARCH_SEARCHER_INTERNAL_H_
