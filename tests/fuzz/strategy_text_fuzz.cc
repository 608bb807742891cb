// ParseStrategyText (spec/strategy.h): a strategy that parses writes a
// canonical text that parses back to it, and its JSON form does too.
#include "spec/strategy.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<Strategy> s = ParseStrategyText(fuzz::Text(data, size));
  if (!s.ok()) return 0;
  FUZZ_CHECK(CheckLayout(*s).ok() && CheckCheckpointPercent(*s).ok(), StrategyToText(*s));
  const std::string text = StrategyToText(*s);
  absl::StatusOr<Strategy> again = ParseStrategyText(text);
  FUZZ_CHECK(again.ok(), text + ": " + again.status().ToString());
  FUZZ_CHECK(*again == *s, text);
  FUZZ_CHECK(StrategyToText(*again) == text, text);
  absl::StatusOr<Strategy> from_json = StrategyFromJson(StrategyToJson(*s));
  FUZZ_CHECK(from_json.ok() && *from_json == *s, StrategyToJson(*s).dump());
  return 0;
}
