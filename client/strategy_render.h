// How the CLI shows the strategy database: the list of stored answers with
// their provenance (`autoaccel strategies`), and the line that says a job
// was answered from the database (`tune`, `job`, `watch`). Formats are part
// of the CLI's contract (docs/CLI.md).
//
// Pure functions of the messages given; any thread.
#ifndef AUTOACCEL_CLIENT_STRATEGY_RENDER_H_
#define AUTOACCEL_CLIENT_STRATEGY_RENDER_H_

#include <ostream>
#include <string>

#include "nlohmann/json.hpp"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

// The provenance of a stored answer: {"job_id", "stored_at", "first_stored_at",
// "engine_version" (a number; 0: stored before versions were recorded),
// "confirmed", "hardware", "signature", "model": {"family", "seq_len",
// "global_batch_size"}}.
nlohmann::json AnswerProvenanceJson(const v1::StrategyAnswer& a);
// {"strategies": [{"strategy", "strategy_json", "metrics", ...provenance}]}
nlohmann::json StrategyListJson(const v1::ListStrategiesResponse& list);

// A table of stored answers, one line each (model, sequence length, batch,
// hardware, tokens/s, peak memory, engine version, date stored, job,
// strategy), or one line saying there are none.
void PrintStrategyList(std::ostream& out, const v1::ListStrategiesResponse& list);

// "answered from the strategy database: job J of 2026-11-24 08:00 UTC, engine
// v3, measured 2 times; --force to tune again" (no newline).
std::string AnsweredFromLine(const v1::StrategyAnswer& a);

// How sure the job that stored `a` was: "settled (3 measurements, spread
// 1.0%, 95% interval 980-1020 tokens/s)", "a tie (...) with 2 other
// strategies", "provisional (measured once)"; for answers stored before
// certainties were recorded "measured again" or "measured once".
std::string CertaintyText(const v1::StrategyAnswer& a);

// "v3", or "-" for an answer stored before engine versions were recorded.
std::string EngineVersionText(const v1::StrategyAnswer& a);
// "2026-11-24 08:00 UTC" for unix seconds; "-" for 0.
std::string StoredDate(double unix_seconds);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_STRATEGY_RENDER_H_
