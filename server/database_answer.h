// Answering a tuning request from the strategy database, and saying what a
// job's answer did to it.
//
// A stored answer answers a request at once (no trial runs) unless the
// request says `force`, when:
//  - it was measured by this build's engine version (common/engine_version.h):
//    figures of another version answer another question. A request whose
//    stored answer is older tunes again, and its answer replaces the old one
//    (ReplacesStoredAnswer below);
//  - its strategy is a candidate of the request's space: the candidate lists
//    (--precisions, --tp-sizes, ...), include/exclude and the layouts of its
//    world size. A user who restricted the space never gets an answer
//    outside it: that request tunes (and its answer, if faster, replaces the
//    stored one);
//  - the request does not load a strategy to run it once: --load-strategy
//    without --finetune asks for a measurement of that strategy, not for the
//    best one. With --finetune it asks for the best, and is answered only by
//    a stored strategy that keeps every value the loaded one sets (a user who
//    loads zero2 with bf16 never gets a pure_bf16 answer in its place).
// Not weighed: the stored answer's job may have searched a narrower space or
// been cut short by its time limit (it is the best measured so far for the
// signature; --force searches again), and the request's measurement settings
// (warm-up, measured steps, minimum time) and budget (time limit, trials,
// algorithm) do not change the question.
//
// Pure: no store, no clock; any thread.
#ifndef AUTOACCEL_SERVER_DATABASE_ANSWER_H_
#define AUTOACCEL_SERVER_DATABASE_ANSWER_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/store/records.h"
#include "server/tune_request.h"

namespace autoaccel {

struct StoredAnswerVerdict {
  bool answers = false;
  // Why a stored answer does not answer the request, for the job's status
  // ("the stored answer was measured by engine v0, this server's is v1");
  // "" when it answers or nothing is stored.
  std::string why_not;
};

// Whether `stored` (the answer for the request's signature, if any) answers
// the request of `spec`. REQUIRES: spec.space is still enumerated (before
// the job's searcher takes it).
StoredAnswerVerdict JudgeStoredAnswer(const JobSpec& spec,
                                      const std::optional<StrategyRecord>& stored);

// Makes `record` (its id, request and signature already set) the record of
// a job answered by `answer` at `now`: SUCCEEDED, started and finished at
// `now`, no candidates, the answer kept in answered_from and named in the
// status message. DATA_LOSS if the answer's stored strategy does not parse.
absl::Status AnswerJobFromDatabase(const StrategyRecord& answer, absl::Time now, JobRecord* record);

// "engine v3"; "an unversioned engine" for 0 (answers stored before versions
// were recorded).
std::string EngineVersionName(int version);

// What offering `candidate` to the database will do to `stored`, the answer
// it holds for the signature (read just before the job's final write; the
// write's own transaction has the last word): "; stored in the strategy
// database", "; replaces the strategy database's answer measured by engine
// v0 (job J, 1200 tokens/s) although slower: ...", "; not stored: ...".
std::string DescribeAnswerOffer(const StrategyRecord& candidate,
                                const std::optional<StrategyRecord>& stored);

// Whether `candidate` takes the place of `stored` as the answer for their
// signature (Store::FinishJob executes it in the transaction that finishes
// the job). Figures of two engine versions do not compare: a newer
// version's answer replaces an older one's even when slower, and an older
// version's never replaces a newer one's. Within one version: a confirmed
// answer replaces one measured once (an outlier must not stay forever), one
// measured once never replaces a confirmed one, and between two of the same
// kind the faster stays (on a tie, the candidate).
bool ReplacesStoredAnswer(const StrategyRecord& candidate, const StrategyRecord& stored);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_DATABASE_ANSWER_H_
