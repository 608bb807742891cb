// Reading the file a command-line flag names (--model-config, --model-file,
// --device-catalog), for every command that takes one. Any thread.
#ifndef AUTOACCEL_CLIENT_FLAG_FILE_H_
#define AUTOACCEL_CLIENT_FLAG_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace autoaccel {

// The whole of `path`. INVALID_ARGUMENT naming `flag` and the path when it
// is a directory, cannot be read, or is larger than `max_bytes`.
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path,
                                         int64_t max_bytes);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_FLAG_FILE_H_
