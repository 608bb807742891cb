#include "spec/config_override.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "common/utf8.h"

namespace autoaccel {
namespace {

// Levenshtein distance between `a` and `b`.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Every key of `config` as a dotted path, nested objects included.
void CollectPaths(const nlohmann::json& node, const std::string& prefix,
                  std::vector<std::string>* out) {
  if (!node.is_object()) return;
  for (const auto& [key, value] : node.items()) {
    const std::string path = prefix.empty() ? key : absl::StrCat(prefix, ".", key);
    out->push_back(path);
    CollectPaths(value, path, out);
  }
}

// The existing key nearest to `key`: by edit distance to the whole path or
// to its trailing segments ("rope_theta" is 0 from
// "rope_parameters.rope_theta"), the shorter path on a tie.
std::string NearestKey(const nlohmann::json& config, absl::string_view key) {
  std::vector<std::string> paths;
  CollectPaths(config, "", &paths);
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& path : paths) {
    size_t distance = EditDistance(key, path);
    for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) {
      distance = std::min(distance, EditDistance(key, absl::string_view(path).substr(dot + 1)));
    }
    if (distance < best_distance || (distance == best_distance && path.size() < best.size())) {
      best = path;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<ConfigOverride> ParseConfigOverride(absl::string_view text, bool new_key) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("override: expected key=value, got '", text, "'"));
  }
  return ConfigOverride{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)), new_key};
}

absl::StatusOr<std::pair<std::string, std::string>> ParseOverride(absl::string_view text) {
  ASSIGN_OR_RETURN(ConfigOverride o, ParseConfigOverride(text));
  return std::make_pair(std::move(o.key), std::move(o.value));
}

absl::Status ApplyConfigOverrides(const std::vector<ConfigOverride>& overrides,
                                  nlohmann::json* config) {
  if (config == nullptr || !config->is_object()) {
    return absl::InvalidArgumentError("model_config: expected a JSON object");
  }
  nlohmann::json result = *config;
  for (size_t i = 0; i < overrides.size(); ++i) {
    const ConfigOverride& o = overrides[i];
    const std::string where = absl::StrCat("override[", i, "] (", o.key, "=", o.value, ")");
    // The key and value become JSON strings, which must be UTF-8 to print.
    size_t bad = 0;
    if (!IsValidUtf8(o.key, &bad) || !IsValidUtf8(o.value, &bad)) {
      return absl::InvalidArgumentError(absl::StrCat("override[", i, "]: not valid UTF-8 (",
                                                     IsValidUtf8(o.key) ? "value" : "key", " byte ",
                                                     bad, ")"));
    }
    const std::vector<std::string> path = absl::StrSplit(o.key, '.');
    nlohmann::json* node = &result;
    for (size_t p = 0; p < path.size(); ++p) {
      if (path[p].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": empty key"));
      }
      if (!node->is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", absl::StrJoin(path.begin(), path.begin() + p, "."),
                         "' is not an object"));
      }
      if (!o.new_key && !node->contains(path[p])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "override[", i, "]: model_config has no key '", o.key, "' (nearest: '",
            NearestKey(result, o.key),
            "'); to add a key the config does not have, mark the override new (--override-new ",
            o.key, "=", o.value, ")"));
      }
      nlohmann::json& child = (*node)[path[p]];  // inserts null when absent
      if (p + 1 < path.size() && child.is_null()) child = nlohmann::json::object();
      node = &child;
    }
    if (JsonNestingDepth(o.value) > kMaxJsonDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("override[", i, "]: value nested deeper than ", kMaxJsonDepth, " levels"));
    }
    nlohmann::json value = nlohmann::json::parse(o.value, nullptr, /*allow_exceptions=*/false);
    *node = value.is_discarded() ? nlohmann::json(o.value) : std::move(value);
  }
  *config = std::move(result);
  return absl::OkStatus();
}

absl::Status ApplyOverrides(const std::vector<std::pair<std::string, std::string>>& kv,
                            nlohmann::json* config) {
  std::vector<ConfigOverride> overrides;
  for (const auto& [key, value] : kv) overrides.push_back({key, value, /*new_key=*/false});
  return ApplyConfigOverrides(overrides, config);
}

}  // namespace autoaccel
