// Names of the files the worker keeps in its work dir. Values that arrive in
// a request (trial ids, digests) become parts of those names, so they are
// checked first: nothing a coordinator sends can name a path outside the
// work dir. Pure; thread-safe.
#ifndef AUTOACCEL_WORKER_FILE_NAMES_H_
#define AUTOACCEL_WORKER_FILE_NAMES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace autoaccel {

// OK when `value` may become part of a file name in the work dir: 1 to 128
// letters, digits, '-', '_' or '.', not starting with '.' (so no "..", no
// '/', no NUL). INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckFileNamePart(absl::string_view field, absl::string_view value);

// "TRIAL-aATTEMPT-rRANK" ("job-...-t0003-a1-r0"): the stem of one rank's
// work files (.spec.json, .result.json, .log), one per rank, so a trial's
// ranks on one machine never share one. REQUIRES: CheckFileNamePart accepts
// `trial_id`.
std::string RankFileStem(absl::string_view trial_id, int attempt, int rank);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_FILE_NAMES_H_
