// ParsePythonLiteral (search/python_literal.h): errors are INVALID_ARGUMENT,
// and a literal that parses is JSON its users can print (the load-strategy
// errors quote elements with dump()).
#include "search/python_literal.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<nlohmann::json> j = ParsePythonLiteral(fuzz::Text(data, size));
  if (!j.ok()) {
    FUZZ_CHECK(j.status().code() == absl::StatusCode::kInvalidArgument, j.status().ToString());
    return 0;
  }
  std::string printed;
  try {
    printed = j->dump();
  } catch (const nlohmann::json::exception& e) {
    FUZZ_CHECK(false, std::string("dump() threw: ") + e.what());
  }
  FUZZ_CHECK(nlohmann::json::parse(printed) == *j, printed);
  return 0;
}
