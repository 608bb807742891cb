// Protobuf's own log lines (such as its note on each request string that is
// not UTF-8, which the services answer with INVALID_ARGUMENT) go to spdlog
// as warnings, in the daemon's log format, instead of raw to stderr.
#ifndef AUTOACCEL_COMMON_PROTOBUF_LOG_H_
#define AUTOACCEL_COMMON_PROTOBUF_LOG_H_

namespace autoaccel {

// Installs the handler for the whole process. Call once at start, before
// other threads run; fatal protobuf errors still abort.
void LogProtobufThroughSpdlog();

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_PROTOBUF_LOG_H_
