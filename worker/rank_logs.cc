#include "worker/rank_logs.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/child_process.h"
#include "worker/file_names.h"

namespace autoaccel {

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
