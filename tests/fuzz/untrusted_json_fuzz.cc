// ParseUntrustedJson (common/untrusted_json.h): it accepts exactly the valid
// JSON no deeper than the limit, and what it accepts prints and reads back.
#include "common/untrusted_json.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  const absl::string_view text = fuzz::Text(data, size);
  constexpr int kDepth = 8;  // small, so the fuzzer reaches it
  absl::StatusOr<nlohmann::json> j = ParseUntrustedJson(text, "fuzz", kDepth);
  const int depth = JsonNestingDepth(text);
  if (!j.ok()) {
    FUZZ_CHECK(j.status().code() == absl::StatusCode::kInvalidArgument, j.status().ToString());
    FUZZ_CHECK(depth > kDepth || !nlohmann::json::accept(text.begin(), text.end()),
               j.status().ToString());
    return 0;
  }
  FUZZ_CHECK(depth <= kDepth, std::to_string(depth));
  std::string printed;
  try {
    printed = j->dump();
  } catch (const nlohmann::json::exception& e) {
    FUZZ_CHECK(false, std::string("dump() threw: ") + e.what());
  }
  FUZZ_CHECK(nlohmann::json::parse(printed) == *j, printed);
  return 0;
}
