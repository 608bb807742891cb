// The files a TrialSpec and a TrialResult travel in between the worker and
// the trial runner: whole JSON documents, read and written at once.
// Thread-safe; several writers of one path race for the last rename.
#ifndef AUTOACCEL_TRIAL_CONTRACT_JSON_FILE_H_
#define AUTOACCEL_TRIAL_CONTRACT_JSON_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

// NOT_FOUND when the file cannot be opened; INVALID_ARGUMENT when it is not
// JSON (or nested too deeply: common/untrusted_json.h).
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// Writes PATH.tmp, then renames it to `path`, so a reader never sees half a
// document. INTERNAL when either step fails.
absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_TRIAL_CONTRACT_JSON_FILE_H_
