// ParseLaunchers (worker/launchers.h): the operator's launchers file. What
// parses has valid names and argv, converts to the proto, and expands with
// every known placeholder given a value.
#include <map>

#include "tests/fuzz/fuzz_check.h"
#include "worker/launchers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<Launchers> launchers =
      ParseLaunchers(fuzz::Text(data, size), "/etc/autoaccel", "launchers.json");
  if (!launchers.ok()) {
    FUZZ_CHECK(launchers.status().code() == absl::StatusCode::kInvalidArgument,
               launchers.status().ToString());
    return 0;
  }
  std::map<std::string, std::string> values;
  for (const std::string& p : KnownPlaceholders()) values[p] = "v";
  for (const auto& [name, def] : *launchers) {
    FUZZ_CHECK(name == def.name && !def.argv.empty(), name);
    FUZZ_CHECK(def.workdir.empty() || def.workdir[0] == '/', def.workdir);
    LauncherToProto(def);
    absl::StatusOr<std::vector<std::string>> argv = ExpandArgv(def, values, {});
    if (def.format.empty()) FUZZ_CHECK(argv.ok(), name + ": " + argv.status().ToString());
  }
  return 0;
}
