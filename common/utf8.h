// UTF-8 validity of text from outside the process, checked before the text
// becomes a JSON string: nlohmann::json's dump() throws on a string that is
// not UTF-8, so one such string (a --load-strategy literal, an --override
// value) would otherwise crash whoever prints it.
#ifndef AUTOACCEL_COMMON_UTF8_H_
#define AUTOACCEL_COMMON_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace autoaccel {

// True when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF). Otherwise false, with `*bad_offset`
// (when not null) the 0-based byte offset of the first sequence that is not.
// Pure; any thread.
bool IsValidUtf8(absl::string_view text, size_t* bad_offset = nullptr);

// `text` as it is when it has at most `max_bytes`; otherwise its first
// `max_bytes` (fewer when that would cut a UTF-8 character) and
// "... (N more bytes)": how a stored or sent text quotes what a caller gave.
// Pure; any thread.
std::string CutText(absl::string_view text, size_t max_bytes);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_UTF8_H_
