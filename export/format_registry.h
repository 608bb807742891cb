// The export formats as data: one row per format (its --format name, one
// line of what it writes, the function that writes it). Adding a format is
// a row here and a file beside the others. Constant; any thread.
#ifndef AUTOACCEL_EXPORT_FORMAT_REGISTRY_H_
#define AUTOACCEL_EXPORT_FORMAT_REGISTRY_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "export/formats.h"

namespace autoaccel {

struct ExportFormat {
  absl::string_view name;         // --format value
  absl::string_view description;  // one line, for --help and docs
  FormatFunction write;
  // Why torchrun cannot start the format's entry point (torchrun:F is then
  // refused, naming it): its own launcher reads its files or starts the
  // ranks itself. Empty: torchrun:F launches it.
  absl::string_view not_under_torchrun = "";
};

// Every format, in the order --help lists them.
absl::Span<const ExportFormat> ExportFormats();

// The row named `name`, or nullptr.
const ExportFormat* FindExportFormat(absl::string_view name);

// "deepspeed, hf-trainer, ..., torchrun, torchrun:F" for messages.
std::string ExportFormatList();

}  // namespace autoaccel

#endif  // AUTOACCEL_EXPORT_FORMAT_REGISTRY_H_
