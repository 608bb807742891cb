// Writing a whole file through a file descriptor, with the mode it is
// created with (umask aside) and, when asked, synced to the disk: what
// std::ofstream cannot promise (its mode is the umask's; its errors are
// flags). Any thread; blocks on the disk.
#ifndef AUTOACCEL_COMMON_FILE_WRITE_H_
#define AUTOACCEL_COMMON_FILE_WRITE_H_

#include <sys/types.h>

#include <string>

#include "absl/strings/string_view.h"

namespace autoaccel {

// Creates or truncates `path` with `mode` and writes `bytes` whole (and
// fsyncs it when `sync`). False on any error, with errno set by the call
// that failed; a file left half-written is the caller's to remove.
bool WriteWholeFile(const std::string& path, absl::string_view bytes, mode_t mode, bool sync);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_FILE_WRITE_H_
