// What `autoaccel logs` shows of one rank: the last lines of the log files in
// its trial directory (WORK_DIR/<RankFileStem>), read on the worker that ran
// it (WorkerService.ReadRankLogs). Reads only those file names, only in that
// directory: nothing a request names can reach another path. Any thread.
#ifndef AUTOACCEL_WORKER_RANK_LOGS_H_
#define AUTOACCEL_WORKER_RANK_LOGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

// The files read, in the order RankLogs lists them: the rank's stderr and
// stdout (launcher ranks), the trial runner's output (engine ranks) and a
// launcher's metrics lines.
inline constexpr const char* kRankLogFiles[] = {"stderr.log", "stdout.log", "trial.log",
                                                "metrics.jsonl"};

// Lines of each file when a request asks for 0, and the most it may ask for.
inline constexpr int kDefaultRankLogLines = 100;
inline constexpr int kMaxRankLogLines = 10000;
// At most this much of each file's end is read (ReadFileTail,
// worker/child_process.h; a few files stay far below gRPC's 4 MB answer
// limit); fewer lines than asked come back when they are longer.
inline constexpr int64_t kMaxRankLogBytes = 512 * 1024;

// The rank's files that exist. INVALID_ARGUMENT for a trial id that cannot
// name a file (worker/file_names.h), a negative rank or attempt, or
// tail_lines outside 0..kMaxRankLogLines; NOT_FOUND naming the directory
// when it is not there (never made, or removed by --keep-trial-dirs).
// `running` is copied into the answer.
absl::StatusOr<v1::RankLogs> ReadRankLogs(const std::string& work_dir,
                                          const v1::ReadRankLogsRequest& request, bool running);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_RANK_LOGS_H_
