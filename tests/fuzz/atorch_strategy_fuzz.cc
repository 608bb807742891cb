// ParseAtorchStrategy (search/atorch_strategy.h): ATorch's strategy list.
// Errors are INVALID_ARGUMENT; a list that parses gives a partial strategy
// whose text reads back to it.
#include "search/atorch_strategy.h"
#include "search/load_strategy.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<PartialStrategy> p = ParseAtorchStrategy(fuzz::Text(data, size));
  if (!p.ok()) {
    FUZZ_CHECK(p.status().code() == absl::StatusCode::kInvalidArgument, p.status().ToString());
    return 0;
  }
  if (p->empty()) return 0;
  absl::StatusOr<PartialStrategy> again = ParseLoadStrategy(p->ToText());
  FUZZ_CHECK(again.ok() && *again == *p, p->ToText());
  return 0;
}
