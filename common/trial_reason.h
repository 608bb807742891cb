// The informative part of a trial's failure reason, for a table row and for
// telling two failures apart.
//
// A coordinator's reason reads "rank 0 on worker HOST:PORT: script exited
// with code 1 after no step reported; stderr:\n<the last lines>": who
// reported it, what happened, and the rank's stderr, whose last line (a
// Python traceback's exception, a launcher's error) usually says why.
// Pure functions; any thread.
#ifndef AUTOACCEL_COMMON_TRIAL_REASON_H_
#define AUTOACCEL_COMMON_TRIAL_REASON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace autoaccel {

// `reason` on one line: without the "rank N on worker W: " and "worker W: "
// prefixes, its first line less any "; stderr:" part, then ": " and the last
// non-blank line of its stderr when it has one ("script exited with code 1
// after no step reported: ModuleNotFoundError: No module named 'trl'"), cut
// to `width` characters with "..." when longer (0: no limit).
std::string ReasonSummary(absl::string_view reason, size_t width = 0);

// ReasonSummary with every run of digits written "#": two failures for the
// same cause on other ranks, workers, steps, ports or trial directories
// have the same key.
std::string ReasonKey(absl::string_view reason);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_TRIAL_REASON_H_
