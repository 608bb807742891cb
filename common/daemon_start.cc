#include "common/daemon_start.h"

#include <spdlog/spdlog.h>

#include "common/json_log.h"
#include "common/status_macros.h"

namespace autoaccel {

std::vector<std::string> MissingProtections(const TlsFiles& tls,
                                            std::optional<bool> has_user_tokens,
                                            bool has_join_token) {
  std::vector<std::string> missing;
  if (!tls.serves_tls()) missing.push_back("TLS (--tls-cert/--tls-key)");
  if (has_user_tokens == false) missing.push_back("user tokens (--tokens)");
  if (!has_join_token) missing.push_back("a join token (--join-token-file)");
  return missing;
}

absl::StatusOr<std::string> StartDaemon(const DaemonStart& start) {
  spdlog::set_level(spdlog::level::from_str(start.log_level));
  ASSIGN_OR_RETURN(std::string why, ApplyListenPolicy(start.daemon, start.ports, start.insecure));
  if (!start.also_insecure.empty()) {
    if (!why.empty()) why += "; ";
    why += start.also_insecure;
    MarkLogsInsecure(why);
  }
  RETURN_IF_ERROR(SetLogFormat(start.log_format, start.daemon, why));
  return why;
}

}  // namespace autoaccel
