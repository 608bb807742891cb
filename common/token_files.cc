#include "common/token_files.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace autoaccel {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    spdlog::warn("{} '{}' may be read by other users than its owner (chmod 600 it)", flag, path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status ShortTokenError(const std::string& where) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": a token must have at least ",
                                                 kMinTokenLength,
                                                 " characters (e.g. `openssl rand -hex 32`)"));
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag) {
  ASSIGN_OR_RETURN(std::string text, ReadSecretFile(path, flag));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (static_cast<int>(line.size()) < kMinTokenLength) {
      return ShortTokenError(absl::StrCat(flag, " '", path, "'"));
    }
    return std::string(line);
  }
  return absl::InvalidArgumentError(absl::StrCat(flag, ": '", path, "' is empty"));
}

}  // namespace autoaccel
