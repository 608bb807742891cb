// A digest of a file's bytes that may be trusted as a cache key: workers keep
// a user's model file under its digest and reuse it for every trial that
// names it, so two different files must never share one.
#ifndef AUTOACCEL_COMMON_CONTENT_DIGEST_H_
#define AUTOACCEL_COMMON_CONTENT_DIGEST_H_

#include <string>

#include "absl/strings/string_view.h"

namespace autoaccel {

// "sha256:<64 lower-case hex digits>" (OpenSSL's SHA-256). Thread-safe.
std::string ContentDigest(absl::string_view bytes);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_CONTENT_DIGEST_H_
