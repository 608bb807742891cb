// Test helper: Prometheus's own linter on an exposition.
#ifndef AUTOACCEL_TESTS_PROMTOOL_H_
#define AUTOACCEL_TESTS_PROMTOOL_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/subprocess.h"

namespace autoaccel::testing {

// What `promtool check metrics` (PROMTOOL_BIN, set by tests/monitoring.cmake)
// says of `text`, written to DIR/scrape.txt: its exit code (0: Prometheus
// reads it and the lint found nothing), its findings in *findings.
inline int Promtool(const std::string& dir, const std::string& text, std::string* findings) {
  const std::string file = dir + "/scrape.txt";
  WriteFile(file, text);
  std::string out;
  const int code =
      RunCommand({"/bin/sh", "-c", absl::StrCat(PROMTOOL_BIN, " check metrics < ", file)}, dir,
                 &out, findings, absl::Seconds(60));
  *findings += out;
  return code;
}

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_PROMTOOL_H_
