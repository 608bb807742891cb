#include "common/bearer_token.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace autoaccel {

std::string BearerTokenOf(const grpc::ServerContextBase& ctx) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kAuthorizationMetadataKey);
  if (it == metadata.end()) return "";
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "Bearer ";
  if (!absl::StartsWithIgnoreCase(value, kScheme)) return "";
  return std::string(value.substr(kScheme.size()));
}

void AddBearerToken(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata(kAuthorizationMetadataKey, "Bearer " + token);
}

}  // namespace autoaccel
