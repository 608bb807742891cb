#include "worker/model_file_cache.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/content_digest.h"
#include "worker/file_names.h"

namespace autoaccel {

absl::StatusOr<std::string> StoreModelFile(const std::string& work_dir, const std::string& digest,
                                           const std::string& bytes, const std::string& writer) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError("model_file: a torchscript trial came without its file");
  }
  // The digest names the file: "algorithm:hex" and nothing else.
  const size_t colon = digest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == digest.size() ||
      !CheckFileNamePart("script_digest", digest.substr(0, colon)).ok() ||
      !std::all_of(digest.begin() + colon + 1, digest.end(), ::isxdigit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("script_digest: expected ALGORITHM:HEX, got '", digest, "'"));
  }
  const std::string dir = work_dir + "/models";
  std::string name = digest;
  std::replace(name.begin(), name.end(), ':', '-');
  const std::string path = absl::StrCat(dir, "/", name, ".pt");
  // Only verified files get this name: a job's later trials reuse it without
  // hashing the bytes again (up to 512 MiB, on the RPC thread).
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      std::filesystem::file_size(path, ec) == static_cast<uintmax_t>(bytes.size())) {
    return path;
  }
  if (const std::string actual = ContentDigest(bytes); actual != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_file: content digest ", actual, " does not match ", digest));
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::string unique = writer;  // one file name part per writer
  std::replace(unique.begin(), unique.end(), '/', '-');
  const std::string tmp = absl::StrCat(path, ".", unique, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return path;
}

}  // namespace autoaccel
