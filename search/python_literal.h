// Python literals, as ATorch users write strategies in them (search/
// atorch_strategy.h reads the list it gives): lists, tuples, sets, dicts,
// strings in either quote with Python's escapes, ints, floats, True / False /
// None, bare dotted names and # comments. Pure; any thread.
#ifndef AUTOACCEL_SEARCH_PYTHON_LITERAL_H_
#define AUTOACCEL_SEARCH_PYTHON_LITERAL_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

// The one literal `text` holds, as JSON: lists, tuples and sets become
// arrays ("()" is an empty tuple, "(x)" is x, "(x,)" a one-element tuple),
// dicts objects (a key that is not a string is keyed by its JSON text),
// None null, bare dotted names strings (torch.bfloat16 reads as
// "torch.bfloat16"). Strings may not span lines (a backslash-newline
// continues them); an unknown escape keeps its backslash, as in Python.
// Nesting is limited to 100 levels. INVALID_ARGUMENT says what and where,
// the offset 0-based bytes into `text`:
//   "expected ']' at offset 16", "unterminated string at offset 1",
//   "invalid UTF-8 at offset 3", "number out of range at offset 0" (1e999),
//   "expected end of input at offset 10", "nesting deeper than 100 at offset 100"
absl::StatusOr<nlohmann::json> ParsePythonLiteral(absl::string_view text);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_PYTHON_LITERAL_H_
