// Enumerations with stable user-facing names, as a table of (value, name)
// pairs: one place for the name <-> value lookups that every such enum needs.
// Callers word their own errors (each names its field).
#ifndef AUTOACCEL_COMMON_ENUM_NAMES_H_
#define AUTOACCEL_COMMON_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace autoaccel {

template <typename Enum, size_t N>
using EnumNameTable = std::pair<Enum, absl::string_view>[N];

// The name of `value`, or `fallback` when the table lacks it.
template <typename Enum, size_t N>
absl::string_view EnumName(const EnumNameTable<Enum, N>& table, Enum value,
                           absl::string_view fallback) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return fallback;
}

// The value named `name` (exact match), or nullopt.
template <typename Enum, size_t N>
std::optional<Enum> EnumFromName(const EnumNameTable<Enum, N>& table, absl::string_view name) {
  for (const auto& [v, text] : table) {
    if (text == name) return v;
  }
  return std::nullopt;
}

// "a, b, c": every name, in table order, for "allowed: ..." messages.
template <typename Enum, size_t N>
std::string EnumNameList(const EnumNameTable<Enum, N>& table) {
  return absl::StrJoin(table, ", ", [](std::string* out, const auto& entry) {
    out->append(entry.second.data(), entry.second.size());
  });
}

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_ENUM_NAMES_H_
