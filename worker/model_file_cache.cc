#include "worker/model_file_cache.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/content_digest.h"
#include "common/file_write.h"
#include "common/status_macros.h"
#include "worker/file_names.h"

namespace autoaccel {

namespace {

// WORK_DIR/models/ALGORITHM-HEX.pt for a well-formed digest.
absl::StatusOr<std::string> ModelFilePath(const std::string& work_dir, const std::string& digest) {
  // The digest names the file: "algorithm:hex" and nothing else.
  const size_t colon = digest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == digest.size() ||
      !CheckFileNamePart("script_digest", digest.substr(0, colon)).ok() ||
      !std::all_of(digest.begin() + colon + 1, digest.end(), ::isxdigit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("script_digest: expected ALGORITHM:HEX, got '", digest, "'"));
  }
  std::string name = digest;
  std::replace(name.begin(), name.end(), ':', '-');
  return absl::StrCat(work_dir, "/models/", name, ".pt");
}

}  // namespace

absl::StatusOr<std::optional<std::string>> FindModelFile(const std::string& work_dir,
                                                         const std::string& digest) {
  ASSIGN_OR_RETURN(const std::string path, ModelFilePath(work_dir, digest));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
  return path;
}

int RemoveUnusedModelFiles(const std::string& work_dir, absl::Duration unused_for) {
  namespace fs = std::filesystem;
  const auto before = fs::file_time_type::clock::now() - absl::ToChronoSeconds(unused_for);
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(work_dir + "/models", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code entry_ec;
    const auto written = fs::last_write_time(it->path(), entry_ec);
    if (!entry_ec && written < before && fs::remove(it->path(), entry_ec)) ++removed;
  }
  return removed;
}

absl::StatusOr<std::string> StoreModelFile(const std::string& work_dir, const std::string& digest,
                                           const std::string& bytes, const std::string& writer) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError("model_file: a torchscript trial came without its file");
  }
  ASSIGN_OR_RETURN(const std::string path, ModelFilePath(work_dir, digest));
  const std::string dir = std::filesystem::path(path).parent_path().string();
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
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  std::string unique = writer;  // one file name part per writer
  std::replace(unique.begin(), unique.end(), '/', '-');
  const std::string tmp = absl::StrCat(path, ".", unique, ".tmp");
  // 0644 in a 0700 directory: no other user of the host reaches the file,
  // and a rank the sandbox runs as another user reads it through its bind.
  if (!WriteWholeFile(tmp, bytes, 0644, /*sync=*/false)) {
    std::filesystem::remove(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return path;
}

}  // namespace autoaccel
