#include "worker/process_tree_memory.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"

namespace autoaccel {
namespace {

// Process group and RSS (pages) of /proc/PID/stat: fields 5 and 24, counted
// after the command name, which is in parentheses and may hold spaces.
bool ReadStat(const std::string& pid, long* pgrp, int64_t* rss_pages) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 24 && fields >> field; ++i) {
    if (i == 5 && !absl::SimpleAtoi(field, pgrp)) return false;
    if (i == 24) return absl::SimpleAtoi(field, rss_pages);
  }
  return false;
}

}  // namespace

int64_t ProcessGroupRssBytes(pid_t pgid) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  int64_t total = 0;
  while (const dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    long pgrp = 0;
    int64_t pages = 0;
    if (ReadStat(name, &pgrp, &pages) && pgrp == pgid && pages > 0) total += pages * page;
  }
  ::closedir(proc);
  return total;
}

int64_t ProcessTreeMemory::Poll() {
  const int64_t now = ProcessGroupRssBytes(pgid_);
  peak_ = std::max(peak_, now);
  return now;
}

}  // namespace autoaccel
