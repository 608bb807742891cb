// How sure a job is of its answer: each measured strategy's throughput with
// its uncertainty, and whether the fastest is told apart from its rivals
// (settled), cannot be (a tie), or needs more measurements.
//
// A strategy's measurements are its eligible trials (its first and its
// repeats), each a trial's median-step throughput. Of three or more, the one
// farthest from their median is set aside (one outlier, a quiet moment or a
// stall on a shared machine, is the common case); the rest are *kept*. Its
// figure is the mean of the kept ones, and its interval a 95% t-interval for
// that mean: mean ± t(0.975, k-1)·s/√k over the k kept (the estimator:
// Student's t over repeated measurements), never below 0. Measured once, its run-to-run
// spread is unknown and the job's tolerance stands for it: [v·(1-tol),
// v·(1+tol)]. Its measurements *agree* when it has two or more and (max -
// min) / min of the kept ones is at most the tolerance, or when three or
// more are kept and the interval's half-width is at most the tolerance of
// the figure: single runs on a busy machine may differ by more than the
// tolerance, yet enough of them pin the mean down as tightly.
//
// The leader is the strategy with the highest figure among those measured
// more than once (among all when none is). Its rivals are the other
// strategies whose interval overlaps the leader's. Then:
//  - settled: the leader's measurements agree and no interval overlaps its
//    own;
//  - tie: the leader's measurements agree and rivals overlap it. The answer
//    is the simplest strategy of the tie (SimplerStrategy) among those whose
//    own measurements agree (a rival that overlaps only because its
//    measurements disagree is not known to be as fast), and the others are
//    listed. Measuring the leader, its closest rival and the tie's simplest
//    again (while each has fewer than kMaxMeasurements) may still part them
//    (measure_again);
//  - provisional: the leader's measurements do not agree (or it was
//    measured once): measure it again while time allows; if the job ends so,
//    its answer is provisional, never confirmed.
//
// Pure functions over trial records: no store, no clock; any thread.
#ifndef AUTOACCEL_SERVER_SETTLE_H_
#define AUTOACCEL_SERVER_SETTLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/store/records.h"
#include "spec/strategy.h"

namespace autoaccel {

// A strategy is measured at most this many times by one job.
inline constexpr int kMaxMeasurements = 5;

// The 95% interval of a strategy's mean throughput (tokens/s).
struct ThroughputInterval {
  double mean = 0;
  double low = 0;
  double high = 0;
};

// Whether a trial's measurement counts among its strategy's: eligible as
// an answer (search/searcher.h IsEligible, `memory_limit_bytes` > 0 a
// limit) and not a proxy job's full-size check (TrialRecord.full_size: a
// measurement of another kind than the proxies' extrapolations it checks).
bool CanAnswer(const TrialRecord& t, int64_t memory_limit_bytes);

// `kept` (throughputs of one strategy, at least one) as above.
ThroughputInterval IntervalOf(const std::vector<double>& kept, double tolerance);

// `values` less the one farthest from their median when there are three or
// more (the first such on a tie), in their order.
std::vector<double> KeptMeasurements(const std::vector<double>& values);

// One measured strategy of a job.
struct Standing {
  std::string strategy_text;
  const TrialRecord* first = nullptr;       // the search's measurement, if eligible
  std::vector<const TrialRecord*> repeats;  // eligible confirmation trials
  std::vector<double> throughputs;          // every eligible measurement's
  std::vector<double> kept;                 // throughputs less the one set aside (3 or more)
  double figure = 0;                        // the mean of the kept ones
  ThroughputInterval interval;
  double spread = 0;              // (max - min) / min of the kept ones; 0 with one
  bool agrees = false;            // see "agree" above
  int64_t peak_memory_bytes = 0;  // the largest of its measurements'
  int measurements() const { return static_cast<int>(throughputs.size()); }
};

// "measured 3 times, spread 2%, 95% interval 980-1020 tokens/s", or
// "measured once" for fewer than two: how an answer's measurements read in
// every status line that states them.
std::string MeasuredText(int measurements, double spread, double low, double high);

enum class Certainty { kNone, kSettled, kTie, kProvisional };
// "settled", "tie", "provisional", "" for kNone.
const char* CertaintyName(Certainty c);

struct Standings {
  Certainty certainty = Certainty::kNone;  // kNone: no strategy can answer
  // Every strategy that can answer, by figure, fastest first (ties in
  // figure: the earlier trial first). A strategy whose only measurement is
  // noisy (TrialMetrics::IsNoisy) is not among them.
  std::vector<Standing> ranked;
  // Index in `ranked` of the answer: the leader, or the simplest of its tie.
  int answer = -1;
  // The strategies the leader ties with (a tie), by figure, leader included.
  std::vector<std::string> tie;
  // Strategies whose next measurement may decide (leader first); empty when
  // none would: settled, or every one of them measured kMaxMeasurements times.
  std::vector<std::string> measure_again;
  const Standing* Answer() const { return answer < 0 ? nullptr : &ranked[answer]; }
};

// The standings of a job's `trials` (in proposal order). The Standings'
// first/repeats point into `trials`: keep it alive while reading them. Only trials
// eligible as answers count (searcher.h IsEligible: SUCCEEDED, finite
// throughput, MFU at most 100%, peak memory within `memory_limit_bytes` when
// > 0). `tolerance` > 0: see above.
Standings Settle(const std::vector<TrialRecord>& trials, int64_t memory_limit_bytes,
                 double tolerance);

// The order among strategies that tie: true when `a` is simpler than `b` —
// fewer of sharding, recomputation (checkpointing) and offload switched on
// (a strategy text that does not parse counts as all three); then lower
// peak memory; then the strategy text, for a stable order.
bool SimplerStrategy(const Standing& a, const Standing& b);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_SETTLE_H_
