// A small HTTP/1.1 server (cpp-httplib) for the coordinator's monitoring
// endpoints: GET routes on exact paths, each answered by a handler, on the
// library's own pool of threads.
//
// Plain HTTP, no authentication: what it serves must be safe for anyone who
// can reach the port (docs/MONITORING.md).
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

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers a GET (or HEAD) of its path; `query` holds the decoded query
// parameters (the last of a repeated name).
using HttpHandler = std::function<HttpResponse(const std::map<std::string, std::string>& query)>;

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
