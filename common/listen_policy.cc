#include "common/listen_policy.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/local_address.h"

namespace autoaccel {

bool IsLoopbackListen(const std::string& listen) {
  return IsLoopbackHost(listen.substr(0, listen.rfind(':')));
}

namespace {

bool RunsInsecurely(const std::string& listen, const std::vector<std::string>& missing) {
  return !missing.empty() && !IsLoopbackListen(listen);
}

}  // namespace

absl::Status CheckListenPolicy(const std::string& daemon, const std::string& listen,
                               const std::vector<std::string>& missing, bool insecure) {
  if (insecure || !RunsInsecurely(listen, missing)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      daemon, " would be reachable at ", listen, ", which is not a loopback address, without ",
      absl::StrJoin(missing, " and "),
      ": anyone who can reach the port could use it. Give them (deploy/tls/README.md shows how "
      "to issue certificates and tokens), listen on 127.0.0.1, or pass --insecure to run "
      "unprotected anyway"));
}

absl::StatusOr<std::string> ApplyListenPolicy(const std::string& daemon, const std::string& listen,
                                              const std::vector<std::string>& missing,
                                              bool insecure) {
  if (absl::Status ok = CheckListenPolicy(daemon, listen, missing, insecure); !ok.ok()) return ok;
  if (!RunsInsecurely(listen, missing)) return std::string();
  const std::string why = "no " + absl::StrJoin(missing, ", no ");
  spdlog::set_pattern(absl::StrCat("[%Y-%m-%d %H:%M:%S.%e] [%l] [INSECURE: ", why, "] %v"));
  return why;
}

}  // namespace autoaccel
