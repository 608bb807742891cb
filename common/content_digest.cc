#include "common/content_digest.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace autoaccel {

std::string ContentDigest(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // EVP_Digest fails only without memory; the digest is then left empty and
  // matches nothing.
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    size = 0;
  }
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(
                                     reinterpret_cast<const char*>(digest), size)));
}

}  // namespace autoaccel
