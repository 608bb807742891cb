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

namespace {

absl::Status CheckPort(const std::string& daemon, const ListenPort& port, bool insecure) {
  if (insecure || !RunsInsecurely(port.listen, port.missing)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      daemon, port.port.empty() ? "" : absl::StrCat("'s ", port.port), " would be reachable at ",
      port.listen, ", which is not a loopback address, without ",
      absl::StrJoin(port.missing, " and "),
      ": anyone who can reach the port could use it. Give them (deploy/tls/README.md shows how "
      "to issue certificates and tokens), listen on 127.0.0.1, or pass --insecure to run "
      "unprotected anyway"));
}

}  // namespace

absl::Status CheckListenPolicy(const std::string& daemon, const std::string& listen,
                               const std::vector<std::string>& missing, bool insecure) {
  return CheckPort(daemon, ListenPort{listen, missing, ""}, insecure);
}

absl::StatusOr<std::string> ApplyListenPolicy(const std::string& daemon,
                                              const std::vector<ListenPort>& ports, bool insecure) {
  std::vector<std::string> lacks;
  for (const ListenPort& port : ports) {
    if (absl::Status ok = CheckPort(daemon, port, insecure); !ok.ok()) return ok;
    if (!RunsInsecurely(port.listen, port.missing)) continue;
    lacks.push_back(absl::StrCat(port.port.empty() ? "" : port.port + ": ", "no ",
                                 absl::StrJoin(port.missing, ", no ")));
  }
  if (lacks.empty()) return std::string();
  const std::string why = absl::StrJoin(lacks, "; ");
  MarkLogsInsecure(why);
  return why;
}

void MarkLogsInsecure(const std::string& why) {
  spdlog::set_pattern(absl::StrCat("[%Y-%m-%d %H:%M:%S.%e] [%l] [INSECURE: ", why, "] %v"));
}

}  // namespace autoaccel
