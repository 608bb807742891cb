#include "worker/launchers.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "export/format_registry.h"
#include "spec/strategy_fields.h"
#include "worker/accelerators.h"

namespace autoaccel {
namespace {

constexpr absl::string_view kLauncherKeys[] = {"argv", "workdir", "env", "format", "dimensions"};

// The worker's own values (the strategy's keys are added to these).
constexpr absl::string_view kWorkerPlaceholders[] = {
    "strategy_file", "trial_dir",    "metrics_file",  "python",
    "rank",          "local_rank",   "world_size",    "global_batch_size",
    "seq_len",       "warmup_steps", "measured_steps"};

bool IsIdentifierStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsIdentifierChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// The length of "{identifier}" at token[i] (token[i] == '{'), or 0 when
// what follows the brace is not an identifier and a '}'.
size_t PlaceholderLength(absl::string_view token, size_t i) {
  size_t j = i + 1;
  if (j >= token.size() || !IsIdentifierStart(token[j])) return 0;
  while (j < token.size() && IsIdentifierChar(token[j])) ++j;
  return j < token.size() && token[j] == '}' ? j + 1 - i : 0;
}

// The NAME of a whole-token "{*NAME}", or "" for any other token.
absl::string_view ListPlaceholder(absl::string_view token) {
  if (token.size() < 4 || !absl::StartsWith(token, "{*") || !absl::EndsWith(token, "}")) return "";
  absl::string_view name = token.substr(2, token.size() - 3);
  if (!IsIdentifierStart(name[0])) return "";
  for (char c : name) {
    if (!IsIdentifierChar(c)) return "";
  }
  return name;
}

// Calls f(name) for every "{name}" inside `token`; returns the token with
// each replaced by f's result.
template <typename F>
std::string ReplacePlaceholders(absl::string_view token, F&& f) {
  std::string out;
  size_t i = 0;
  while (i < token.size()) {
    const size_t len = token[i] == '{' ? PlaceholderLength(token, i) : 0;
    if (len == 0) {
      out.push_back(token[i++]);
      continue;
    }
    out += f(token.substr(i + 1, len - 2));
    i += len;
  }
  return out;
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

bool ValidEnvName(absl::string_view name) {
  return !name.empty() && IsIdentifierStart(name[0]) &&
         std::all_of(name.begin(), name.end(), IsIdentifierChar);
}

std::vector<std::string> StrategyKeys() {
  std::vector<std::string> keys;
  ForEachRow(kStrategyFields, [&](const auto& field) { keys.emplace_back(field.name); });
  return keys;
}

// The stem of a file name: "ds_config.json" -> "ds_config".
absl::string_view Stem(absl::string_view name) { return name.substr(0, name.find('.')); }

// The exported file a placeholder names, or nullptr.
const ExportedFile* FileFor(absl::string_view placeholder, const std::vector<ExportedFile>& files) {
  if (placeholder == "deepspeed_config") placeholder = "ds_config";
  for (const ExportedFile& f : files) {
    if (Stem(f.name) == placeholder) return &f;
  }
  return nullptr;
}

std::string FileNames(const std::vector<ExportedFile>& files) {
  if (files.empty()) return "none";
  return absl::StrJoin(files, ", ",
                       [](std::string* out, const ExportedFile& f) { out->append(f.name); });
}

class LauncherParser {
 public:
  LauncherParser(absl::string_view source, const std::string& name)
      : prefix_(absl::StrCat(source, ": launcher '", name, "': ")) {}

  absl::Status Error(absl::string_view field, absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, field, ": ", why));
  }

  absl::StatusOr<LauncherDef> Parse(const std::string& name, const nlohmann::json& j,
                                    const std::string& file_dir) {
    LauncherDef def;
    def.name = name;
    if (!j.is_object()) return Error("definition", "must be a JSON object");
    for (const auto& [key, value] : j.items()) {
      if (std::find(std::begin(kLauncherKeys), std::end(kLauncherKeys), key) ==
          std::end(kLauncherKeys)) {
        return Error(
            key, absl::StrCat("unknown key (allowed: ", absl::StrJoin(kLauncherKeys, ", "), ")"));
      }
    }
    if (!j.contains("argv")) return Error("argv", "missing (a non-empty list of strings)");
    const nlohmann::json& argv = j["argv"];
    if (!argv.is_array() || argv.empty()) {
      return Error("argv", "must be a non-empty list of strings");
    }
    for (size_t i = 0; i < argv.size(); ++i) {
      if (!argv[i].is_string() || argv[i].get<std::string>().empty()) {
        return Error(absl::StrCat("argv[", i, "]"), "must be a non-empty string");
      }
      def.argv.push_back(argv[i].get<std::string>());
    }
    if (j.contains("workdir")) {
      if (!j["workdir"].is_string() || j["workdir"].get<std::string>().empty()) {
        return Error("workdir", "must be a non-empty string (a directory)");
      }
      std::filesystem::path dir = j["workdir"].get<std::string>();
      if (dir.is_relative()) dir = std::filesystem::path(file_dir) / dir;
      def.workdir = dir.lexically_normal().string();
      if (def.workdir.size() > 1 && def.workdir.back() == '/') def.workdir.pop_back();
    }
    if (j.contains("env")) {
      if (!j["env"].is_object()) return Error("env", "must be an object of NAME: \"value\"");
      for (const auto& [var, value] : j["env"].items()) {
        const std::string field = absl::StrCat("env.", var);
        if (!ValidEnvName(var)) return Error(field, "a variable name is [A-Za-z_][A-Za-z0-9_]*");
        const std::vector<std::string>& reserved = ReservedEnvironmentNames();
        if (std::find(reserved.begin(), reserved.end(), var) != reserved.end()) {
          return Error(field, absl::StrCat("the worker sets it for every rank (it sets ",
                                           absl::StrJoin(reserved, ", "), ")"));
        }
        if (!value.is_string()) return Error(field, "the value must be a string");
        def.env.emplace_back(var, value.get<std::string>());
      }
    }
    if (j.contains("format")) {
      if (!j["format"].is_string()) return Error("format", "must be a string");
      def.format = j["format"].get<std::string>();
      if (FindExportFormat(def.format) == nullptr) {
        return Error("format", absl::StrCat("unknown export format '", def.format,
                                            "' (allowed: ", ExportFormatList(), ")"));
      }
    }
    if (j.contains("dimensions")) {
      if (!j["dimensions"].is_array()) return Error("dimensions", "must be a list of strings");
      const std::vector<std::string> keys = StrategyKeys();
      for (size_t i = 0; i < j["dimensions"].size(); ++i) {
        const nlohmann::json& d = j["dimensions"][i];
        const std::string field = absl::StrCat("dimensions[", i, "]");
        if (!d.is_string()) return Error(field, "must be a string");
        const std::string key = d.get<std::string>();
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
          return Error(field, absl::StrCat("unknown strategy dimension '", key,
                                           "' (allowed: ", absl::StrJoin(keys, ", "), ")"));
        }
        if (std::find(def.dimensions.begin(), def.dimensions.end(), key) != def.dimensions.end()) {
          return Error(field, absl::StrCat("'", key, "' given twice"));
        }
        def.dimensions.push_back(key);
      }
    }
    RETURN_IF_ERROR(CheckPlaceholders(def));
    return def;
  }

 private:
  absl::Status CheckPlaceholders(const LauncherDef& def) const {
    const std::vector<std::string>& known = KnownPlaceholders();
    for (size_t i = 0; i < def.argv.size(); ++i) {
      const std::string field = absl::StrCat("argv[", i, "]");
      const std::string& token = def.argv[i];
      if (!ListPlaceholder(token).empty()) {
        if (def.format.empty()) {
          return Error(field, absl::StrCat(token,
                                           " expands an exported file's lines, but the launcher "
                                           "has no format (so no files are exported)"));
        }
        continue;
      }
      if (absl::StrContains(token, "{*")) {
        for (size_t at = token.find("{*"); at != std::string::npos; at = token.find("{*", at + 1)) {
          if (ListPlaceholder(token.substr(at, token.find('}', at) - at + 1)) != "") {
            return Error(field, absl::StrCat("'", token,
                                             "': {*NAME} expands to several tokens, so it must be "
                                             "a whole token"));
          }
        }
      }
      absl::Status unknown = absl::OkStatus();
      ReplacePlaceholders(token, [&](absl::string_view name) {
        if (unknown.ok() && def.format.empty() &&
            !std::binary_search(known.begin(), known.end(), std::string(name))) {
          unknown = Error(field, absl::StrCat("unknown placeholder {", name,
                                              "} (known: ", absl::StrJoin(known, ", "),
                                              "; a launcher with a format may also name its files "
                                              "by stem, e.g. {ds_config})"));
        }
        return std::string();
      });
      RETURN_IF_ERROR(unknown);
    }
    return absl::OkStatus();
  }

  std::string prefix_;
};

}  // namespace

const std::vector<std::string>& ReservedEnvironmentNames() {
  static const std::vector<std::string>* names = [] {
    auto* v = new std::vector<std::string>{"RANK",
                                           "LOCAL_RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK",
                                           "ROLE_RANK",
                                           "ROLE_WORLD_SIZE",
                                           "MASTER_ADDR",
                                           "MASTER_PORT",
                                           "AUTOACCEL_STRATEGY_FILE",
                                           "AUTOACCEL_TRIAL_DIR",
                                           "AUTOACCEL_METRICS_FILE",
                                           "AUTOACCEL_WARMUP_STEPS",
                                           "AUTOACCEL_MEASURED_STEPS",
                                           "AUTOACCEL_TRIAL_ID",
                                           "AUTOACCEL_DEVICE_TYPE",
                                           "OMP_NUM_THREADS"};
    for (const AcceleratorType& a : AcceleratorTypes()) v->emplace_back(a.visible_devices);
    return v;
  }();
  return *names;
}

const std::vector<std::string>& KnownPlaceholders() {
  static const std::vector<std::string>* names = [] {
    auto* v = new std::vector<std::string>(std::begin(kWorkerPlaceholders),
                                           std::end(kWorkerPlaceholders));
    for (std::string& key : StrategyKeys()) v->push_back(std::move(key));
    std::sort(v->begin(), v->end());
    return v;
  }();
  return *names;
}

absl::StatusOr<Launchers> ParseLaunchers(absl::string_view text, const std::string& file_dir,
                                         absl::string_view source) {
  ASSIGN_OR_RETURN(const nlohmann::json j, ParseUntrustedJson(text, source));
  if (!j.is_object() || !j.contains("launchers")) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": expected {\"launchers\": {\"NAME\": {\"argv\": [...], ...}, ...}}"));
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "launchers") {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": unknown key '", key, "' (the file holds only \"launchers\")"));
    }
  }
  if (!j["launchers"].is_object() || j["launchers"].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": launchers: must be a non-empty object of NAME: {definition}"));
  }
  Launchers launchers;
  for (const auto& [name, value] : j["launchers"].items()) {
    if (!ValidName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": launcher '", name,
                       "': bad name (1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.')"));
    }
    LauncherParser parser(source, name);
    ASSIGN_OR_RETURN(LauncherDef def, parser.Parse(name, value, file_dir));
    launchers.emplace(name, std::move(def));
  }
  return launchers;
}

absl::StatusOr<Launchers> ReadLaunchersFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--launchers: ", path, ": not a readable file"));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--launchers: cannot read ", path));
  const std::string dir = fs::absolute(fs::path(path), ec).parent_path().string();
  ASSIGN_OR_RETURN(Launchers launchers, ParseLaunchers(text.str(), dir, path));
  for (const auto& [name, def] : launchers) {
    if (!def.workdir.empty() && !fs::is_directory(def.workdir, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": launcher '", name, "': workdir: ", def.workdir, " is not a directory"));
    }
  }
  return launchers;
}

v1::Launcher LauncherToProto(const LauncherDef& def) {
  v1::Launcher l;
  l.set_name(def.name);
  l.set_format(def.format);
  for (const std::string& d : def.dimensions) l.add_dimensions(d);
  return l;
}

absl::StatusOr<std::vector<std::string>> ExpandArgv(
    const LauncherDef& def, const std::map<std::string, std::string>& values,
    const std::vector<ExportedFile>& files) {
  auto missing = [&](absl::string_view placeholder) {
    return absl::NotFoundError(
        absl::StrCat("launcher '", def.name, "': ", placeholder, " names no value and no file the ",
                     def.format.empty() ? "(absent) export" : absl::StrCat(def.format, " export"),
                     " wrote for this strategy (files written: ", FileNames(files), ")"));
  };
  std::vector<std::string> argv;
  for (const std::string& token : def.argv) {
    if (absl::string_view list = ListPlaceholder(token); !list.empty()) {
      const ExportedFile* file = FileFor(list, files);
      if (file == nullptr) return missing(token);
      for (absl::string_view line : absl::StrSplit(file->content, '\n')) {
        line = absl::StripTrailingAsciiWhitespace(line);
        if (!absl::StripAsciiWhitespace(line).empty()) argv.emplace_back(line);
      }
      continue;
    }
    absl::Status status = absl::OkStatus();
    std::string expanded = ReplacePlaceholders(token, [&](absl::string_view name) -> std::string {
      if (auto it = values.find(std::string(name)); it != values.end()) return it->second;
      if (const ExportedFile* file = FileFor(name, files)) return file->path;
      if (status.ok()) status = missing(absl::StrCat("{", name, "}"));
      return "";
    });
    RETURN_IF_ERROR(status);
    argv.push_back(std::move(expanded));
  }
  return argv;
}

}  // namespace autoaccel
