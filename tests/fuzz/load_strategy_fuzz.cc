// ParseLoadStrategy (search/load_strategy.h): all three forms of
// --load-strategy (canonical text keys, a JSON object, ATorch's Python list).
// A partial strategy that parses writes a text that parses back to it.
#include "search/load_strategy.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<PartialStrategy> p = ParseLoadStrategy(fuzz::Text(data, size));
  if (!p.ok()) {
    FUZZ_CHECK(p.status().code() == absl::StatusCode::kInvalidArgument, p.status().ToString());
    return 0;
  }
  const std::string text = p->ToText();
  if (p->empty()) return 0;  // "" is not a --load-strategy (blank text is refused)
  absl::StatusOr<PartialStrategy> again = ParseLoadStrategy(text);
  FUZZ_CHECK(again.ok(), text + ": " + again.status().ToString());
  FUZZ_CHECK(*again == *p, text + " reads back as " + again->ToText());
  return 0;
}
