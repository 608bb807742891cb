// What the fuzz targets share: FUZZ_CHECK, an invariant whose failure is a
// finding (libFuzzer saves the input when the process aborts), and the input
// as a string_view. Included by tests/fuzz/*_fuzz.cc only.
#ifndef AUTOACCEL_TESTS_FUZZ_FUZZ_CHECK_H_
#define AUTOACCEL_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"

// Aborts, printing the condition and `detail` (a std::string), when `cond`
// is false.
#define FUZZ_CHECK(cond, detail)                                                             \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n  %s\n", __FILE__, __LINE__, #cond, \
                   std::string(detail).c_str());                                             \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace autoaccel::fuzz {

inline absl::string_view Text(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace autoaccel::fuzz

#endif  // AUTOACCEL_TESTS_FUZZ_FUZZ_CHECK_H_
