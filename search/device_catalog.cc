#include "search/device_catalog.h"

#include <cmath>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "search/device_catalog_data.h"

namespace autoaccel {
namespace {

using nlohmann::json;

// Reads the fields of one entry, each error naming the entry and the field.
class EntryReader {
 public:
  EntryReader(const json& entry, std::string where) : entry_(entry), where_(std::move(where)) {}

  absl::Status Error(absl::string_view field, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": \"", field, "\" ", what));
  }

  // A required (or, with `optional`, possibly absent) string.
  absl::StatusOr<std::string> String(absl::string_view field, bool optional = false) const {
    const auto it = entry_.find(std::string(field));
    if (it == entry_.end() || it->is_null()) {
      if (optional) return std::string();
      return Error(field, "is missing");
    }
    if (!it->is_string()) return Error(field, "must be a string");
    std::string value = it->get<std::string>();
    if (!optional && value.empty()) return Error(field, "must not be empty");
    return value;
  }

  // A number of the entry (or of its object `parent`) that satisfies
  // `positive` (> 0) or else >= 0; with `absent_is_zero` a missing field
  // reads as 0.
  absl::StatusOr<double> Number(absl::string_view parent, absl::string_view field, bool positive,
                                bool absent_is_zero = false) const {
    const json* object = &entry_;
    std::string path(field);
    if (!parent.empty()) {
      const auto p = entry_.find(std::string(parent));
      if (p == entry_.end()) return Error(parent, "is missing");
      if (!p->is_object()) return Error(parent, "must be an object");
      object = &*p;
      path = absl::StrCat(parent, ".", field);
    }
    const auto it = object->find(std::string(field));
    if (it == object->end() && absent_is_zero) return 0.0;
    if (it == object->end()) return Error(path, "is missing");
    if (!it->is_number()) return Error(path, "must be a number");
    const double value = it->get<double>();
    if (!std::isfinite(value) || value < 0 || (positive && value == 0)) {
      return Error(path, positive ? "must be a positive number" : "must be a number >= 0");
    }
    return value;
  }

 private:
  const json& entry_;
  std::string where_;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// `unknown_allowed`: a bandwidth of 0 reads as unknown (the inter-node
// network of an entry whose source does not give it).
absl::StatusOr<LinkSpec> ReadLink(const EntryReader& r, absl::string_view field,
                                  bool unknown_allowed) {
  LinkSpec link;
  ASSIGN_OR_RETURN(const double gb_s, r.Number(field, "bandwidth_gb_s", !unknown_allowed));
  ASSIGN_OR_RETURN(const double us, r.Number(field, "latency_us", true));
  link.bandwidth_bytes_per_s = gb_s * 1e9;
  link.latency_s = us * 1e-6;
  return link;
}

absl::StatusOr<CatalogDevice> ReadEntry(const json& entry, size_t index, absl::string_view origin) {
  std::string where = absl::StrCat(origin, ": devices[", index, "]");
  if (!entry.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " must be an object"));
  }
  CatalogDevice d;
  {
    EntryReader named(entry, where);
    ASSIGN_OR_RETURN(d.name, named.String("name"));
  }
  d.name = absl::AsciiStrToLower(d.name);
  where = absl::StrCat(origin, ": device \"", d.name, "\"");
  const EntryReader r(entry, where);
  if (const auto a = entry.find("aliases"); a != entry.end()) {
    if (!a->is_array()) return r.Error("aliases", "must be a list of strings");
    for (const json& alias : *a) {
      if (!alias.is_string() || alias.get<std::string>().empty()) {
        return r.Error("aliases", "must be a list of non-empty strings");
      }
      d.aliases.push_back(absl::AsciiStrToLower(alias.get<std::string>()));
    }
  }
  ASSIGN_OR_RETURN(d.description, r.String("description", /*optional=*/true));
  ASSIGN_OR_RETURN(d.spec.type, r.String("type"));
  if (d.spec.type != "cuda" && d.spec.type != "hip" && d.spec.type != "cpu") {
    return r.Error("type",
                   absl::StrCat("is \"", d.spec.type, "\"; allowed: \"cuda\", \"hip\", \"cpu\""));
  }
  ASSIGN_OR_RETURN(const double gib, r.Number("", "memory_gib", true));
  d.spec.memory_bytes = static_cast<int64_t>(std::llround(gib * kGiB));
  ASSIGN_OR_RETURN(const double bandwidth, r.Number("", "memory_bandwidth_gb_s", true));
  d.spec.memory_bandwidth_bytes_per_s = bandwidth * 1e9;
  for (const PeakTflopsField& f : kPeakTflopsFields) {
    // Each precision may be left out (0: the device has no such path).
    ASSIGN_OR_RETURN(d.spec.peak.*f.member,
                     r.Number("peak_tflops", f.name, false, /*absent_is_zero=*/true));
  }
  if (d.spec.peak == PeakTflops{}) {
    return r.Error("peak_tflops", "must give at least one positive peak (fp32, bf16, fp16, fp8)");
  }
  ASSIGN_OR_RETURN(d.spec.intra_node, ReadLink(r, "intra_node", /*unknown_allowed=*/false));
  ASSIGN_OR_RETURN(d.spec.inter_node, ReadLink(r, "inter_node", /*unknown_allowed=*/true));
  for (auto [field, text] :
       {std::pair{"intra_node", &d.intra_node_link}, std::pair{"inter_node", &d.inter_node_link}}) {
    const json& link = entry.at(field);
    if (const auto l = link.find("link"); l != link.end()) {
      if (!l->is_string()) return r.Error(absl::StrCat(field, ".link"), "must be a string");
      *text = l->get<std::string>();
    }
  }
  ASSIGN_OR_RETURN(const double per_node, r.Number("", "devices_per_node", true));
  if (per_node != std::floor(per_node) || per_node > 1e6) {
    return r.Error("devices_per_node", "must be a whole number >= 1");
  }
  d.spec.devices_per_node = static_cast<int>(per_node);
  ASSIGN_OR_RETURN(d.nvidia_smi_name, r.String("nvidia_smi_name", /*optional=*/true));
  ASSIGN_OR_RETURN(d.source, r.String("source"));
  ASSIGN_OR_RETURN(d.node_source, r.String("node_source", /*optional=*/true));
  ASSIGN_OR_RETURN(d.notes, r.String("notes", /*optional=*/true));
  if (entry.contains("price_per_gpu_hour")) {
    ASSIGN_OR_RETURN(d.price_per_gpu_hour, r.Number("", "price_per_gpu_hour", true));
  }
  return d;
}

bool Answers(const CatalogDevice& d, absl::string_view lower) {
  if (d.name == lower) return true;
  for (const std::string& a : d.aliases) {
    if (a == lower) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<DeviceCatalog> DeviceCatalog::Parse(absl::string_view json_text,
                                                   absl::string_view origin) {
  const json doc = json::parse(json_text.begin(), json_text.end(), nullptr,
                               /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not a JSON document"));
  }
  if (!doc.is_object() || !doc.contains("devices") || !doc.at("devices").is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": expected {\"devices\": [ ... ]}, a list of device entries"));
  }
  DeviceCatalog catalog;
  std::set<std::string> names;
  size_t index = 0;
  for (const json& entry : doc.at("devices")) {
    ASSIGN_OR_RETURN(CatalogDevice d, ReadEntry(entry, index++, origin));
    std::vector<std::string> keys = d.aliases;
    keys.push_back(d.name);
    for (const std::string& key : keys) {
      if (!names.insert(key).second) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": device \"", d.name,
                                                       "\": the name \"", key,
                                                       "\" is already used by another entry"));
      }
    }
    catalog.devices_.push_back(std::move(d));
  }
  return catalog;
}

absl::StatusOr<DeviceCatalog> DeviceCatalog::BuiltIn() {
  static const absl::StatusOr<DeviceCatalog>* const built_in = new absl::StatusOr<DeviceCatalog>(
      Parse(kBuiltInDeviceCatalogJson, "built-in device catalog"));
  return *built_in;
}

void DeviceCatalog::Merge(const DeviceCatalog& other) {
  for (const CatalogDevice& d : other.devices_) {
    bool replaced = false;
    for (auto it = devices_.begin(); it != devices_.end();) {
      bool clash = Answers(*it, d.name);
      for (const std::string& a : d.aliases) clash = clash || Answers(*it, a);
      if (!clash) {
        ++it;
      } else if (!replaced) {
        *it = d;
        replaced = true;
        ++it;
      } else {
        it = devices_.erase(it);
      }
    }
    if (!replaced) devices_.push_back(d);
  }
}

const CatalogDevice* DeviceCatalog::Find(absl::string_view name) const {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const CatalogDevice& d : devices_) {
    if (Answers(d, lower)) return &d;
  }
  return nullptr;
}

const CatalogDevice* DeviceCatalog::FindGpu(absl::string_view gpu_name) const {
  for (const CatalogDevice& d : devices_) {
    if (!d.nvidia_smi_name.empty() && absl::EqualsIgnoreCase(d.nvidia_smi_name, gpu_name)) {
      return &d;
    }
  }
  return nullptr;
}

absl::StatusOr<CatalogDevice> DeviceCatalog::Get(absl::string_view name) const {
  if (const CatalogDevice* d = Find(name)) return *d;
  std::vector<std::string> known;
  for (const CatalogDevice& d : devices_) known.push_back(d.name);
  return absl::NotFoundError(absl::StrCat(
      "no device \"", name, "\" in the device catalog; known: ", absl::StrJoin(known, ", "),
      " (add one with --device-catalog FILE)"));
}

}  // namespace autoaccel
