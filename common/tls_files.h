// TLS for gRPC from PEM files: a daemon's certificate and key (what it
// serves with) and the CA whose certificates a connecting side trusts
// (--tls-cert, --tls-key, --tls-ca on autoaccel-server, autoaccel-worker and
// autoaccel). deploy/tls/make-certs shows how to issue them.
#ifndef AUTOACCEL_COMMON_TLS_FILES_H_
#define AUTOACCEL_COMMON_TLS_FILES_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

struct TlsFiles {
  std::string cert;  // PEM certificate chain this side presents; "" = none
  std::string key;   // its PEM private key; given together with cert
  std::string ca;    // PEM CA certificates this side trusts; "" = none

  // Serves TLS (cert and key given).
  bool serves_tls() const { return !cert.empty(); }
};

// The PEM content of the file at `path`. INVALID_ARGUMENT naming `flag` for
// a missing, unreadable or non-PEM file (its content is never echoed).
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag);

// INVALID_ARGUMENT when only one of cert and key is given.
absl::Status CheckTlsFiles(const TlsFiles& files);

// TLS server credentials from files.cert and files.key, or plaintext ones
// when neither is given. INVALID_ARGUMENT naming the flag for a missing,
// unreadable, empty or non-PEM file (the key's content is never echoed).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TlsFiles& files);

// Channel credentials for connecting: TLS trusting only files.ca's
// certificates when it is given, else plaintext. (No client certificate:
// callers prove who they are with bearer tokens, common/bearer_token.h.)
// Errors as ServerCredentialsFor.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const TlsFiles& files);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_TLS_FILES_H_
