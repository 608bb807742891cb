// The --json document of an export:
//   {"format", "files": {name: content}, "command",
//    "fidelity": [{"dimension", "value", "status", "note"}],
//    "architecture": [{"feature", "value", "status", "note"}],
//    "rejected", "nnodes", "nproc_per_node"}
// (files in the result's order; "files" empty and "command" "" when
// rejected; "architecture" [] for the formats without one, see
// ArchitectureRow). Pure; any thread.
#ifndef AUTOACCEL_EXPORT_EXPORT_JSON_H_
#define AUTOACCEL_EXPORT_EXPORT_JSON_H_

#include "export/exporter.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

nlohmann::ordered_json ExportResultToJson(const ExportResult& r);

}  // namespace autoaccel

#endif  // AUTOACCEL_EXPORT_EXPORT_JSON_H_
