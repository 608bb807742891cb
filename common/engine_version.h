// The engine version: one number naming what a trial measures — the
// measurement semantics of the trial runner (engine/) and of the worker that
// runs it (warm-up and timed steps, how step time, tokens/s, FLOPs, MFU and
// peak memory are taken, and how each strategy dimension is implemented).
//
// Every answer in the strategy database records the version that measured
// it (server/store/store.h, StrategyRecord::engine_version), because figures of two
// versions do not compare:
//  - `tune` answers from the database only with an answer of this version
//    (server/database_answer.h);
//  - an answer of a newer version replaces an older version's even when it
//    is slower, and an older version's answer never replaces a newer one's
//    (server/database_answer.h, ReplacesStoredAnswer).
// Answers stored before versions were recorded read as version 0, older
// than every version.
//
// Bump it, with a line below, when a change to engine/, worker/ or
// trial_contract/ changes the figures a trial reports for the same strategy:
// a fix to timing or to memory accounting, a strategy dimension implemented
// differently (a faster kernel, another overlap of communication), a changed
// default number of steps. Do not bump it for a change no measurement sees
// (a refactor, a crash fix, a new model family: its signatures are new).
//
// The coordinator records its own build's version: it assumes the workers'
// trial runners come from the same build (one CMake project builds them
// all).
//
// History:
//   1  the first recorded version (strategies schema 5).
#ifndef AUTOACCEL_COMMON_ENGINE_VERSION_H_
#define AUTOACCEL_COMMON_ENGINE_VERSION_H_

namespace autoaccel {

inline constexpr int kEngineVersion = 1;

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_ENGINE_VERSION_H_
