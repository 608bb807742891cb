// A small HTTP/1.1 server (cpp-httplib) for the coordinator's monitoring
// endpoints and dashboard: GET routes on exact paths, each answered by a
// handler, on the library's own pool of threads.
//
// Plain HTTP. The endpoint itself authenticates nothing: a handler that
// serves what not everyone may see checks the request's headers itself
// (server/dashboard_routes.h); docs/MONITORING.md and docs/SECURITY.md.
//
// Threads: handlers run on the server's threads, several at once; Stop() (or
// the destructor) waits for the ones running to return. Start and Stop are
// called from one thread.
#ifndef AUTOACCEL_SERVER_HTTP_ENDPOINT_H_
#define AUTOACCEL_SERVER_HTTP_ENDPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

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

class HttpEndpoint {
 public:
  // Binds `listen` ("HOST:PORT", "[IPV6]:PORT"; port 0 picks a free one)
  // and serves `routes`, by exact path, until Stop(); any other path is 404,
  // any other method 405. INVALID_ARGUMENT naming --http-listen for an
  // address that is not HOST:PORT; UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& listen, std::map<std::string, HttpHandler> routes);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // Stops accepting and waits for the requests being answered. Idempotent.
  void Stop();

 private:
  struct Impl;
  HttpEndpoint(std::unique_ptr<Impl> impl, std::string host, int port);

  std::unique_ptr<Impl> impl_;
  const std::string host_;
  const int port_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_HTTP_ENDPOINT_H_
