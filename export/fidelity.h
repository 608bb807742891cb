// Collects a format's fidelity rows, one per strategy dimension, and checks
// that none is missing: the rows are keyed by the strategy's field table
// (spec/strategy_fields.h), so a new dimension makes every format that
// does not say what it does with it fail (Finish, and export_test).
// One thread's at a time.
#ifndef AUTOACCEL_EXPORT_FIDELITY_H_
#define AUTOACCEL_EXPORT_FIDELITY_H_

#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "export/exporter.h"
#include "spec/strategy_fields.h"

namespace autoaccel {

class FidelityBuilder {
 public:
  explicit FidelityBuilder(const Strategy& s) : strategy_(s) {}

  // The row of the dimension held in `member`; a second call for the same
  // dimension replaces the first.
  template <typename T>
  void Set(T Strategy::*member, FidelityStatus status, std::string note = "") {
    ForEachRow(kStrategyFields, [&](const auto& field) {
      if constexpr (std::is_same_v<RowValue<decltype(field)>, T>) {
        if (field.member != member) return;
        rows_[std::string(field.name)] = FidelityRow{
            std::string(field.name), FieldText(field, strategy_.*member), status, std::move(note)};
      }
    });
  }
  template <typename T>
  void Exact(T Strategy::*member, std::string note = "") {
    Set(member, FidelityStatus::kExact, std::move(note));
  }
  template <typename T>
  void Approximated(T Strategy::*member, std::string note) {
    Set(member, FidelityStatus::kApproximated, std::move(note));
  }
  template <typename T>
  void NotExpressible(T Strategy::*member, std::string note) {
    Set(member, FidelityStatus::kNotExpressible, std::move(note));
  }
  template <typename T>
  void Rejected(T Strategy::*member, std::string note) {
    Set(member, FidelityStatus::kRejected, std::move(note));
  }

  bool rejected() const;

  // The rows in kStrategyFields' order. INTERNAL "format F: no fidelity row
  // for dimension D" when one is missing (a format that has not been taught
  // a new dimension).
  absl::StatusOr<std::vector<FidelityRow>> Finish(absl::string_view format) const;

 private:
  const Strategy& strategy_;
  std::map<std::string, FidelityRow> rows_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_EXPORT_FIDELITY_H_
