// ParseDuration (common/duration.h): what parses is a finite duration, not
// negative (a time limit or a timeout).
#include "common/duration.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<absl::Duration> d = ParseDuration(fuzz::Text(data, size));
  if (!d.ok()) return 0;
  FUZZ_CHECK(*d >= absl::ZeroDuration(), autoaccel::FormatDuration(*d));
  FUZZ_CHECK(*d != absl::InfiniteDuration(), autoaccel::FormatDuration(*d));
  return 0;
}
