// ParseInputSpec (spec/input_spec.h): a spec that parses writes a
// canonical text that parses back to it (the header's promise).
#include "spec/input_spec.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<InputSpec> spec = ParseInputSpec(fuzz::Text(data, size));
  if (!spec.ok()) return 0;
  const std::string text = InputSpecToText(*spec);
  absl::StatusOr<InputSpec> again = ParseInputSpec(text);
  FUZZ_CHECK(again.ok(), text + ": " + again.status().ToString());
  FUZZ_CHECK(*again == *spec, text);
  for (const InputTensorSpec& input : spec->inputs) {
    if (!input.is_alias()) ResolveShape(input, 8, 1024);
  }
  TokensPerSample(*spec, 1024);
  return 0;
}
