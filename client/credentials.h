// How the CLI proves who it is and whom it trusts: a user token (--token,
// $AUTOACCEL_TOKEN, --token-file, $AUTOACCEL_TOKEN_FILE, or the file
// $XDG_CONFIG_HOME/autoaccel/token, ~/.config/autoaccel/token by default, in
// that order: like gh and kubectl), sent as a bearer token with every call,
// and --tls-ca ($AUTOACCEL_TLS_CA): connect over TLS trusting that CA. The
// token is never printed.
#ifndef AUTOACCEL_CLIENT_CREDENTIALS_H_
#define AUTOACCEL_CLIENT_CREDENTIALS_H_

#include <grpcpp/channel.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

struct CredentialFlags {
  std::string token;
  std::string token_file;
  std::string tls_ca;
};

// Adds --token, --token-file and --tls-ca (with their environment variables)
// to `app`; `flags` must outlive parsing.
void AddCredentialFlags(CLI::App* app, CredentialFlags* flags);

// The token to send: --token's, else --token-file's, else the default
// file's if it exists, else "" (no token). INVALID_ARGUMENT when a named
// file cannot be read or holds no token.
absl::StatusOr<std::string> ResolveToken(const CredentialFlags& flags);

// A channel to `server` with the token and TLS the flags give. Errors as
// ResolveToken, and INVALID_ARGUMENT for an unreadable --tls-ca.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenServerChannel(const std::string& server,
                                                                 const CredentialFlags& flags);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_CREDENTIALS_H_
