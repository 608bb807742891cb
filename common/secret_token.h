// Secrets that authenticate a caller: user and join tokens read from files,
// and the session tokens the coordinator hands each worker. Thread-safe.
#ifndef AUTOACCEL_COMMON_SECRET_TOKEN_H_
#define AUTOACCEL_COMMON_SECRET_TOKEN_H_

#include <string>

#include "absl/strings/string_view.h"

namespace autoaccel {

// 32 random bytes (OpenSSL's RAND_bytes) as 64 lower-case hex digits.
// Aborts if the system's random source fails: a guessable token is worse
// than no service.
std::string NewSecretToken();

// Whether `given` equals `expected`, in time that depends on neither's
// content (their SHA-256 digests are compared with CRYPTO_memcmp), so a
// caller cannot learn a token a byte at a time. An empty `expected` never
// matches.
bool SecretTokensEqual(absl::string_view given, absl::string_view expected);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_SECRET_TOKEN_H_
