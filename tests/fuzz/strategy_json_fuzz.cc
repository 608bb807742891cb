// StrategyFromJson (spec/strategy.h) of untrusted JSON: a strategy that
// parses writes JSON and canonical text that both parse back to it.
#include "common/untrusted_json.h"
#include "spec/strategy.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<nlohmann::json> j = ParseUntrustedJson(fuzz::Text(data, size), "strategy");
  if (!j.ok()) return 0;
  absl::StatusOr<Strategy> s = StrategyFromJson(*j);
  if (!s.ok()) return 0;
  const nlohmann::json out = StrategyToJson(*s);
  absl::StatusOr<Strategy> again = StrategyFromJson(out);
  FUZZ_CHECK(again.ok() && *again == *s, out.dump());
  FUZZ_CHECK(StrategyToJson(*again) == out, out.dump());
  absl::StatusOr<Strategy> from_text = ParseStrategyText(StrategyToText(*s));
  FUZZ_CHECK(from_text.ok() && *from_text == *s, StrategyToText(*s));
  return 0;
}
