// Walking a field table: a std::tuple of rows, one per field of a value type,
// each row a struct with a `Value` type and a `name` (spec/strategy_fields.h,
// spec/trial_metrics_fields.h). Codecs call a generic lambda for each row
// and branch on the row's value type with `if constexpr`.
#ifndef AUTOACCEL_SPEC_FIELD_TABLE_H_
#define AUTOACCEL_SPEC_FIELD_TABLE_H_

#include <tuple>
#include <type_traits>

namespace autoaccel {

// The value type of a row (for `const auto& field` in a generic lambda:
// RowValue<decltype(field)>).
template <typename Row>
using RowValue = typename std::decay_t<Row>::Value;

// Calls f(row) for every row of `table`, in order.
template <typename Table, typename F>
void ForEachRow(const Table& table, F&& f) {
  std::apply([&f](const auto&... row) { (f(row), ...); }, table);
}

// Calls f(row) for the rows of `table` in order until one returns true;
// returns whether one did.
template <typename Table, typename F>
bool AnyRow(const Table& table, F&& f) {
  return std::apply([&f](const auto&... row) { return (f(row) || ...); }, table);
}

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_FIELD_TABLE_H_
