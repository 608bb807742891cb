#include "server/http/http_endpoint.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/tls_files.h"

namespace autoaccel {
namespace {

// Threads answering requests, each with its own epoll loop.
constexpr unsigned kThreads = 4;

// libmicrohttpd's messages (a bind that failed, a TLS handshake refused) at
// debug level: the caller reports what matters.
void LogLibraryMessage(void*, const char* format, va_list args) {
  char line[512];
  std::vsnprintf(line, sizeof(line), format, args);
  size_t n = std::strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  spdlog::debug("http: {}", line);
}

MHD_Result CollectValue(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* into = static_cast<std::map<std::string, std::string>*>(cls);
  (*into)[key] = value == nullptr ? "" : value;
  return MHD_YES;
}

MHD_Result CollectHeader(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* into = static_cast<std::map<std::string, std::string>*>(cls);
  (*into)[absl::AsciiStrToLower(key)] = value == nullptr ? "" : value;
  return MHD_YES;
}

HttpResponse Refusal(int status, std::string text) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(text);
  return r;
}

// Whether the request announces a body: any Transfer-Encoding, or a
// Content-Length that is not 0.
bool CarriesBody(const std::map<std::string, std::string>& headers) {
  if (headers.count("transfer-encoding") > 0) return true;
  auto it = headers.find("content-length");
  if (it == headers.end()) return false;
  uint64_t length = 0;
  return !absl::SimpleAtoi(it->second, &length) || length > 0;
}

}  // namespace

bool HostHeaderAllowed(const std::string& host_header,
                       const std::vector<std::string>& allowed_hosts) {
  std::string host = host_header;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string::npos) return false;
    in6_addr v6;
    return ::inet_pton(AF_INET6, host.substr(1, close - 1).c_str(), &v6) == 1;
  }
  const size_t colon = host.rfind(':');
  if (colon != std::string::npos) host = host.substr(0, colon);
  in_addr v4;
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return true;
  host = absl::AsciiStrToLower(host);
  if (host == "localhost") return true;
  for (const std::string& name : allowed_hosts) {
    if (absl::AsciiStrToLower(name) == host) return true;
  }
  return false;
}

struct HttpEndpoint::Impl {
  MHD_Daemon* daemon = nullptr;
  std::map<std::string, HttpHandler> routes;
  HttpEndpointOptions options;
  std::string cert_pem, key_pem;  // alive while the daemon runs

  // Every request is answered here on its headers alone: libmicrohttpd
  // calls this first with no body read, and a response queued now ends the
  // request (a body it announced is never read; the connection closes).
  static MHD_Result OnRequest(void* cls, MHD_Connection* connection, const char* url,
                              const char* method, const char*, const char*, size_t*, void**) {
    const Impl* impl = static_cast<const Impl*>(cls);
    HttpRequest request;
    request.path = url;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader, &request.headers);
    HttpResponse answer = impl->Answer(method, &request, connection);
    MHD_Response* response = MHD_create_response_from_buffer(answer.body.size(), answer.body.data(),
                                                             MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", answer.content_type.c_str());
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : answer.headers) {
      MHD_add_response_header(response, name.c_str(), value.c_str());
    }
    const MHD_Result queued =
        MHD_queue_response(connection, static_cast<unsigned>(answer.status), response);
    MHD_destroy_response(response);
    return queued;
  }

  HttpResponse Answer(const std::string& method, HttpRequest* request,
                      MHD_Connection* connection) const {
    if (options.check_host) {
      auto host = request->headers.find("host");
      if (host != request->headers.end() &&
          !HostHeaderAllowed(host->second, options.allowed_hosts)) {
        return Refusal(403,
                       "this server is not reached by that host name (it has no user "
                       "tokens: use its IP address or localhost, or give --http-host)\n");
      }
    }
    const bool get = method == "GET" || method == "HEAD";
    if (!get) {
      HttpResponse r = Refusal(405, "only GET and HEAD\n");
      r.headers["Allow"] = "GET, HEAD";
      return r;
    }
    if (CarriesBody(request->headers)) return Refusal(413, "a GET carries no body\n");
    auto it = routes.find(request->path);
    if (it == routes.end()) return Refusal(404, absl::StrCat("no page at ", request->path, "\n"));
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectValue, &request->query);
    return it->second(*request);
  }
};

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& listen, std::map<std::string, HttpHandler> routes,
    HttpEndpointOptions options) {
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  int port = -1;
  if (colon == std::string::npos || host.empty() ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen: '", listen, "' is not HOST:PORT (port 0..65535; 0 picks a free one)"));
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto impl = std::make_unique<Impl>();
  impl->routes = std::move(routes);
  impl->options = std::move(options);
  const HttpEndpointOptions& opts = impl->options;
  if (opts.tls_cert_file.empty() != opts.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--http-tls-cert and --http-tls-key go together: give both (the certificate and its "
        "private key)");
  }
  const bool tls = !opts.tls_cert_file.empty();
  if (tls) {
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
      return absl::FailedPreconditionError(
          "--http-tls-cert: this build's libmicrohttpd has no TLS support");
    }
    absl::StatusOr<std::string> cert = ReadPemFile(opts.tls_cert_file, "--http-tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile(opts.tls_key_file, "--http-tls-key");
    if (!key.ok()) return key.status();
    impl->cert_pem = *std::move(cert);
    impl->key_pem = *std::move(key);
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const std::string unavailable = absl::StrCat("--http-listen: cannot listen on ", listen,
                                               " (in use, or not an address of "
                                               "this host)");
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError(unavailable);
  }
  sockaddr_storage address{};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  const bool v6 = found->ai_family == AF_INET6;
  ::freeaddrinfo(found);

  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
  if (v6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  Impl* raw = impl.get();
  // SO_REUSEADDR (libmicrohttpd's default when MHD_OPTION_LISTENING_ADDRESS_REUSE
  // is not given: a restarted server binds at once past TIME_WAIT) but never
  // SO_REUSEPORT: a second server on a taken port must fail, not share it.
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_SOCK_ADDR, 0, &address},
      {MHD_OPTION_THREAD_POOL_SIZE, kThreads, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, kHttpMaxConnections, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, kHttpMaxConnectionsPerAddress, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(absl::ToInt64Seconds(kHttpIdleTimeout)),
       nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(kHttpMaxHeaderBytes), nullptr},
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&LogLibraryMessage), nullptr},
  };
  if (tls) {
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(raw->cert_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(raw->key_pem.c_str())});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  raw->daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &Impl::OnRequest, raw,
                                 MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (raw->daemon == nullptr) return absl::UnavailableError(unavailable);
  const MHD_DaemonInfo* info = MHD_get_daemon_info(raw->daemon, MHD_DAEMON_INFO_BIND_PORT);
  const int bound = info == nullptr ? port : info->port;
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(impl), host, bound));
}

HttpEndpoint::HttpEndpoint(std::unique_ptr<Impl> impl, std::string host, int port)
    : impl_(std::move(impl)), host_(std::move(host)), port_(port) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

bool HttpEndpoint::tls() const { return !impl_->cert_pem.empty(); }

void HttpEndpoint::Stop() {
  if (impl_->daemon == nullptr) return;
  MHD_stop_daemon(impl_->daemon);
  impl_->daemon = nullptr;
}

}  // namespace autoaccel
