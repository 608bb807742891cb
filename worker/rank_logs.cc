#include "worker/rank_logs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "worker/file_names.h"

namespace autoaccel {

absl::StatusOr<FileTail> ReadFileTail(const std::string& path, int max_lines, int64_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  FileTail tail;
  in.seekg(0, std::ios::end);
  tail.size_bytes = static_cast<int64_t>(in.tellg());
  const int64_t start = std::max<int64_t>(0, tail.size_bytes - max_bytes);
  std::string bytes(static_cast<size_t>(tail.size_bytes - start), '\0');
  in.seekg(start);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": short read"));
  }
  absl::string_view text = bytes;
  // A cut through the middle of a line starts at the next whole one.
  if (start > 0) {
    const size_t newline = text.find('\n');
    text.remove_prefix(newline == absl::string_view::npos ? text.size() : newline + 1);
  }
  // The last `max_lines` lines; a final newline ends the last line, it does
  // not start another.
  size_t begin = text.size();
  const size_t end = !text.empty() && text.back() == '\n' ? text.size() - 1 : text.size();
  int lines = 0;
  for (size_t i = end; i > 0; --i) {
    if (text[i - 1] == '\n' && ++lines == max_lines) {
      begin = i;
      break;
    }
  }
  if (lines < max_lines) begin = 0;
  tail.truncated = start + static_cast<int64_t>(bytes.size() - text.size() + begin) > 0;
  tail.text = std::string(text.substr(begin));
  return tail;
}

absl::StatusOr<v1::RankLogs> ReadRankLogs(const std::string& work_dir,
                                          const v1::ReadRankLogsRequest& request, bool running) {
  RETURN_IF_ERROR(CheckFileNamePart("trial_id", request.trial_id()));
  if (request.attempt() < 0 || request.rank() < 0) {
    return absl::InvalidArgumentError("attempt and rank: must not be negative");
  }
  if (request.tail_lines() < 0 || request.tail_lines() > kMaxRankLogLines) {
    return absl::InvalidArgumentError(absl::StrCat("tail_lines: expected 0 to ", kMaxRankLogLines,
                                                   ", got ", request.tail_lines()));
  }
  const int lines = request.tail_lines() == 0 ? kDefaultRankLogLines : request.tail_lines();
  const std::string dir = absl::StrCat(
      work_dir, "/", RankFileStem(request.trial_id(), request.attempt(), request.rank()));
  std::error_code ec;
  v1::RankLogs logs;
  logs.set_directory(std::filesystem::absolute(dir, ec).string());
  logs.set_running(running);
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat(logs.directory(),
                     " is not there: the rank never started here, or its directory was removed "
                     "(the worker keeps the newest finished ones, --keep-trial-dirs)"));
  }
  for (const char* name : kRankLogFiles) {
    absl::StatusOr<FileTail> tail =
        ReadFileTail(absl::StrCat(dir, "/", name), lines, kMaxRankLogBytes);
    if (absl::IsNotFound(tail.status())) continue;
    RETURN_IF_ERROR(tail.status());
    v1::RankLogFile* file = logs.add_files();
    file->set_name(name);
    file->set_tail(std::move(tail->text));
    file->set_size_bytes(tail->size_bytes);
    file->set_truncated(tail->truncated);
  }
  return logs;
}

}  // namespace autoaccel
