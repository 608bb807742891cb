#include "export/export_json.h"

#include <string>

namespace autoaccel {

nlohmann::ordered_json ExportResultToJson(const ExportResult& r) {
  nlohmann::ordered_json j;
  j["format"] = r.format;
  j["files"] = nlohmann::ordered_json::object();
  for (const auto& [name, content] : r.files) j["files"][name] = content;
  j["command"] = r.command;
  j["fidelity"] = nlohmann::ordered_json::array();
  for (const FidelityRow& row : r.fidelity) {
    j["fidelity"].push_back({{"dimension", row.dimension},
                             {"value", row.value},
                             {"status", std::string(FidelityStatusName(row.status))},
                             {"note", row.note}});
  }
  j["architecture"] = nlohmann::ordered_json::array();
  for (const ArchitectureRow& row : r.architecture) {
    j["architecture"].push_back({{"feature", row.feature},
                                 {"value", row.value},
                                 {"status", std::string(FidelityStatusName(row.status))},
                                 {"note", row.note}});
  }
  j["rejected"] = r.rejected();
  j["nnodes"] = r.nnodes;
  j["nproc_per_node"] = r.nproc_per_node;
  return j;
}

}  // namespace autoaccel
