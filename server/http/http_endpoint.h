// A small HTTP/1.1 server (GNU libmicrohttpd) for the coordinator's
// monitoring endpoints and dashboard: GET routes on exact paths, each
// answered by a handler.
//
// Fit for a port the internet can reach:
//  - event-driven (epoll, a small pool of threads): a connection that sends
//    nothing or a byte a minute holds a socket, not a thread, and is closed
//    after kHttpIdleTimeout of silence; at most kHttpMaxConnections at once,
//    kHttpMaxConnectionsPerAddress from one client address, so /healthz is
//    answered from elsewhere while slow clients wait;
//  - every request is answered on its headers alone: one that carries a
//    body (Content-Length > 0 or any Transfer-Encoding, chunked included)
//    is refused before a byte of it is read (413 for GET/HEAD, 405 for any
//    other method) and its connection closed; a header section over
//    kHttpMaxHeaderBytes is refused;
//  - no Range support: a page is sent whole, once;
//  - optionally TLS (HttpEndpointOptions::tls) and a Host check (a server
//    without user tokens: DNS rebinding must not reach it).
// The endpoint itself authenticates nothing: a handler that serves what not
// everyone may see checks the request's headers itself
// (server/http/dashboard_routes.h); docs/MONITORING.md and docs/SECURITY.md.
//
// Threads: handlers run on the server's threads, several at once; Stop() (or
// the destructor) waits for the ones running to return. Start and Stop are
// called from one thread.
#ifndef AUTOACCEL_SERVER_HTTP_HTTP_ENDPOINT_H_
#define AUTOACCEL_SERVER_HTTP_HTTP_ENDPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace autoaccel {

inline constexpr int kHttpMaxConnections = 1024;
inline constexpr int kHttpMaxConnectionsPerAddress = 64;
inline constexpr absl::Duration kHttpIdleTimeout = absl::Seconds(10);
inline constexpr size_t kHttpMaxHeaderBytes = 32 * 1024;

struct HttpRequest {
  std::string path;
  // The decoded query parameters (the last of a repeated name).
  std::map<std::string, std::string> query;
  // The request's headers by lower-case name (the last of a repeated one).
  std::map<std::string, std::string> headers;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Sent besides Content-Type, and besides the ones every response gets
  // (Cache-Control: no-store, X-Content-Type-Options: nosniff).
  std::map<std::string, std::string> headers = {};
};

// Answers a GET (or HEAD) of its path.
using HttpHandler = std::function<HttpResponse(const HttpRequest& request)>;

struct HttpEndpointOptions {
  // PEM files of the certificate chain and its private key: serve HTTPS.
  // Both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Refuse (403) a request whose Host header names something other than an
  // IP address, "localhost" or one of `allowed_hosts` (case-insensitive,
  // any port): a page a browser fetched from another site's name (DNS
  // rebinding) never reaches the handlers. A request without Host passes.
  bool check_host = false;
  std::vector<std::string> allowed_hosts;
};

class HttpEndpoint {
 public:
  // Binds `listen` ("HOST:PORT", "[IPV6]:PORT"; port 0 picks a free one)
  // and serves `routes`, by exact path, until Stop(); any other path is 404,
  // any other method 405. INVALID_ARGUMENT naming --http-listen for an
  // address that is not HOST:PORT, naming --http-tls-cert/--http-tls-key
  // for one without the other or a file that cannot be read; UNAVAILABLE
  // when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& listen, std::map<std::string, HttpHandler> routes,
      HttpEndpointOptions options = {});
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  bool tls() const;
  // Stops accepting and waits for the requests being answered. Idempotent.
  void Stop();

 private:
  struct Impl;
  HttpEndpoint(std::unique_ptr<Impl> impl, std::string host, int port);

  std::unique_ptr<Impl> impl_;
  const std::string host_;
  const int port_;
};

// Whether a request's Host header value ("name", "name:port", "1.2.3.4:80",
// "[::1]:80") passes the check of HttpEndpointOptions::check_host.
bool HostHeaderAllowed(const std::string& host_header,
                       const std::vector<std::string>& allowed_hosts);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_HTTP_HTTP_ENDPOINT_H_
