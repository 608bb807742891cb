// The dashboard's files (server/http/dashboard/*), embedded into the binary when
// it is built (cmake/embed_files.cmake writes the definitions).
#ifndef AUTOACCEL_SERVER_HTTP_DASHBOARD_FILES_H_
#define AUTOACCEL_SERVER_HTTP_DASHBOARD_FILES_H_

#include <cstddef>

namespace autoaccel {

struct EmbeddedFile {
  const char* name;  // the file's name in server/http/dashboard/, e.g. "index.html"
  const unsigned char* data;
  size_t size;
};

extern const EmbeddedFile kDashboardFiles[];
extern const size_t kDashboardFilesCount;

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_HTTP_DASHBOARD_FILES_H_
