#include "client/credentials.h"

#include <cstdlib>
#include <filesystem>

#include "client/watch_retry.h"
#include "common/client_channel.h"
#include "common/status_macros.h"
#include "common/tls_files.h"
#include "common/token_files.h"

namespace autoaccel {
namespace {

// $XDG_CONFIG_HOME/autoaccel/token, or ~/.config/autoaccel/token; "" without
// either variable.
std::string DefaultTokenFile() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/autoaccel/token";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.config/autoaccel/token";
  }
  return "";
}

}  // namespace

void AddCredentialFlags(CLI::App* app, CredentialFlags* flags) {
  app->add_option("--token", flags->token,
                  "your token for a server that requires one (prefer $AUTOACCEL_TOKEN or "
                  "--token-file: a flag shows in the process list)")
      ->envname("AUTOACCEL_TOKEN");
  app->add_option("--token-file", flags->token_file,
                  "file holding your token (default: ~/.config/autoaccel/token if it exists)")
      ->envname("AUTOACCEL_TOKEN_FILE");
  app->add_option("--tls-ca", flags->tls_ca,
                  "PEM CA certificates to trust: connect to the server over TLS")
      ->envname("AUTOACCEL_TLS_CA");
}

absl::StatusOr<std::string> ResolveToken(const CredentialFlags& flags) {
  if (!flags.token.empty()) return flags.token;
  if (!flags.token_file.empty()) return ReadTokenFile(flags.token_file, "--token-file");
  const std::string fallback = DefaultTokenFile();
  std::error_code ec;
  if (!fallback.empty() && std::filesystem::exists(fallback, ec)) {
    return ReadTokenFile(fallback, "token file");
  }
  return std::string();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenServerChannel(const std::string& server,
                                                                 const CredentialFlags& flags) {
  ASSIGN_OR_RETURN(std::string token, ResolveToken(flags));
  TlsFiles tls;
  tls.ca = flags.tls_ca;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                   ChannelCredentialsFor(tls));
  // Reconnects as often as a watch retries (client/watch_retry.h).
  return CreateClientChannel(server, std::move(credentials), token, ReconnectChannelArguments());
}

}  // namespace autoaccel
