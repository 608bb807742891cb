// An ExportRequest (`autoaccel export`, TuningService.Export) as the
// exporter's input (export/exporter.h). Pure; any thread.
#ifndef AUTOACCEL_OFFLINE_EXPORT_REQUEST_H_
#define AUTOACCEL_OFFLINE_EXPORT_REQUEST_H_

#include "absl/status/statusor.h"
#include "export/exporter.h"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

// The input for `request`: the best strategy of `job` (the job the request
// names, which the caller fetched; null when the request gives a strategy),
// with the job's sizes and model (a model the export cannot read is left
// out) and, when the request names no format, the job's launcher's; or the
// request's strategy text, sizes and model.
//   INVALID_ARGUMENT naming the field: no job and no strategy, no format
//     (and, for a job, no launcher format), a strategy that does not parse,
//     sizes that are not positive, a model that does not read;
//   FAILED_PRECONDITION: the job has no best strategy yet ("job J (STATE)
//     has no best strategy to export yet").
absl::StatusOr<ExportInput> ExportInputOf(const v1::ExportRequest& request, const v1::Job* job);

}  // namespace autoaccel

#endif  // AUTOACCEL_OFFLINE_EXPORT_REQUEST_H_
