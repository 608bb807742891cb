// Secrets kept in files (server --tokens and --join-token-file, worker
// --join-token-file, autoaccel --token-file): read whole, with a warning when
// others than the owner may read the file, and never echoed in an error.
#ifndef AUTOACCEL_COMMON_TOKEN_FILES_H_
#define AUTOACCEL_COMMON_TOKEN_FILES_H_

#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

// Tokens shorter than this are refused when read: guessable.
inline constexpr int kMinTokenLength = 16;

// The file's content. INVALID_ARGUMENT naming `flag` and `path` when it
// cannot be read. Logs a warning when its group or others may read it.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& flag);

// One token: the file's first non-blank line, trimmed. INVALID_ARGUMENT
// naming `flag` and `path` when it cannot be read, is empty, or the token is
// shorter than kMinTokenLength.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag);

// INVALID_ARGUMENT saying `where` holds a token shorter than kMinTokenLength.
absl::Status ShortTokenError(const std::string& where);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_TOKEN_FILES_H_
