#include "export/fidelity.h"

#include "absl/strings/str_cat.h"

namespace autoaccel {

bool FidelityBuilder::rejected() const {
  for (const auto& [name, row] : rows_) {
    if (row.status == FidelityStatus::kRejected) return true;
  }
  return false;
}

absl::StatusOr<std::vector<FidelityRow>> FidelityBuilder::Finish(absl::string_view format) const {
  std::vector<FidelityRow> rows;
  std::string missing;
  ForEachRow(kStrategyFields, [&](const auto& field) {
    auto it = rows_.find(std::string(field.name));
    if (it == rows_.end()) {
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", field.name);
    } else {
      rows.push_back(it->second);
    }
  });
  if (!missing.empty()) {
    return absl::InternalError(
        absl::StrCat("format ", format, ": no fidelity row for dimension(s) ", missing));
  }
  return rows;
}

}  // namespace autoaccel
