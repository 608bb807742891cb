// Status helpers shared by every module. Debian's abseil (20220623) ships
// neither RETURN_IF_ERROR nor ASSIGN_OR_RETURN, so they live here, once.
#ifndef AUTOACCEL_COMMON_STATUS_MACROS_H_
#define AUTOACCEL_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define AA_CONCAT_INNER_(a, b) a##b
#define AA_CONCAT_(a, b) AA_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// when it is not OK.
#define RETURN_IF_ERROR(expr)                \
  do {                                       \
    ::absl::Status aa_status_ = (expr);      \
    if (!aa_status_.ok()) return aa_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F());` assigns the value of an absl::StatusOr or
// returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  AA_ASSIGN_OR_RETURN_IMPL_(AA_CONCAT_(aa_statusor_, __LINE__), lhs, expr)
#define AA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // AUTOACCEL_COMMON_STATUS_MACROS_H_
