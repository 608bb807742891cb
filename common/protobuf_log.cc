#include "common/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <string>

namespace autoaccel {
namespace {

void ToSpdlog(google::protobuf::LogLevel level, const char* file, int line,
              const std::string& message) {
  if (level == google::protobuf::LOGLEVEL_INFO) {
    spdlog::debug("protobuf ({}:{}): {}", file, line, message);
  } else {
    spdlog::warn("protobuf ({}:{}): {}", file, line, message);
  }
}

}  // namespace

void LogProtobufThroughSpdlog() { google::protobuf::SetLogHandler(&ToSpdlog); }

}  // namespace autoaccel
