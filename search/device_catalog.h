// The device catalog: what `autoaccel estimate` knows of a device type it
// has never run on, and where the cost model's CUDA priors come from
// (memory, dense peaks, memory bandwidth, intra- and inter-node links,
// devices per node).
//
// The catalog is data: search/device_catalog.json, compiled into the binary
// (CMake turns it into a generated .cc, so an installed CLI needs no data
// path) and extended by a user's file of the same form (--device-catalog),
// whose entries add devices or replace the built-in entry of the same name.
// The file's own "comment" says what each figure means and its units; each
// entry cites its datasheet ("source") and, for the node's links, a
// reference design ("node_source").
//
// worker/device_peak.cc keeps its own table of peaks by nvidia-smi name
// (more GPUs than the catalog); tests/device_catalog_test.cc checks that the
// two agree for every catalog entry's "nvidia_smi_name".
//
// Pure (no file I/O: callers read the file); thread-safe.
#ifndef AUTOACCEL_SEARCH_DEVICE_CATALOG_H_
#define AUTOACCEL_SEARCH_DEVICE_CATALOG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "search/step_time.h"

namespace autoaccel {

// One device type of the catalog.
struct CatalogDevice {
  std::string name;                  // lower case, e.g. "h100-sxm"
  std::vector<std::string> aliases;  // lower case, e.g. "h100"
  std::string description;
  DeviceSpec spec;              // every figure the file gives, in bytes, seconds, TFLOP/s
  std::string intra_node_link;  // what the link is, in words ("NVLink 4 via NVSwitch ...")
  std::string inter_node_link;
  std::string nvidia_smi_name;  // optional: what `nvidia-smi --query-gpu=name` prints
  std::string source;           // the datasheet's URL
  std::string node_source;      // optional: the reference design of the node's links
  std::string notes;            // optional
  // Optional: what a device-hour costs (estimate's time and cost to train);
  // 0: unknown. The built-in catalog gives none: prices are the user's.
  double price_per_gpu_hour = 0;
};

class DeviceCatalog {
 public:
  // Parses a catalog document: {"devices": [entry...]} (other top-level
  // keys, such as "comment", are ignored). Each entry needs: name, type
  // ("cuda", "hip" (AMD's ROCm GPUs, as a worker registers them) or "cpu"),
  // memory_gib > 0, peak_tflops {fp32, bf16, fp16} (each
  // >= 0, at least one > 0), memory_bandwidth_gb_s > 0, intra_node and
  // inter_node {bandwidth_gb_s > 0 (inter_node's may be 0: unknown),
  // latency_us > 0, link (optional text)},
  // devices_per_node >= 1 and source (a URL); aliases, description,
  // nvidia_smi_name, node_source, notes and price_per_gpu_hour (> 0) are
  // optional. Names and aliases
  // are matched case-insensitively and must be unique across the document.
  // Errors: INVALID_ARGUMENT naming `origin` (e.g. the file's path), the
  // entry (its name, or its index when the name is missing) and the field,
  // with what is allowed.
  static absl::StatusOr<DeviceCatalog> Parse(absl::string_view json_text, absl::string_view origin);

  // The catalog compiled into the binary (search/device_catalog.json),
  // parsed once. A built-in file that does not parse is a build error
  // (tests/device_catalog_test.cc), so this never fails once tested; it
  // returns the parse error all the same rather than abort.
  static absl::StatusOr<DeviceCatalog> BuiltIn();

  // Adds `other`'s entries, each replacing an entry of this catalog whose
  // name or alias is one of its name and aliases (a user's file overrides
  // the built-in entry). Order: the replaced entries keep their place, new
  // ones go at the end.
  void Merge(const DeviceCatalog& other);

  // The entry whose name or alias is `name` (case-insensitive), or null.
  const CatalogDevice* Find(absl::string_view name) const;

  // The entry whose nvidia_smi_name is `gpu_name` (case-insensitive; what a
  // worker registers for a CUDA device), or null.
  const CatalogDevice* FindGpu(absl::string_view gpu_name) const;

  // NOT_FOUND listing the known names when `name` is not in the catalog.
  absl::StatusOr<CatalogDevice> Get(absl::string_view name) const;

  const std::vector<CatalogDevice>& devices() const { return devices_; }

 private:
  std::vector<CatalogDevice> devices_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_DEVICE_CATALOG_H_
