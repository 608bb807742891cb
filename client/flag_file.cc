#include "client/flag_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace autoaccel {

absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path,
                                         int64_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " is a directory (give the file in it)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (static_cast<int64_t>(text.str().size()) > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " is larger than ", max_bytes >> 20, " MiB"));
  }
  return text.str();
}

}  // namespace autoaccel
