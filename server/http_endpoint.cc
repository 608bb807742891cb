#include "server/http_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace autoaccel {
namespace {

// A GET carries no body; a request bigger than this is refused.
constexpr size_t kMaxRequestBody = 64 * 1024;
constexpr int kReadTimeoutSeconds = 10;
constexpr int kWriteTimeoutSeconds = 10;

}  // namespace

struct HttpEndpoint::Impl {
  httplib::Server server;
  std::map<std::string, HttpHandler> routes;
  std::thread thread;
  std::atomic<bool> returned{false};  // listen_after_bind returned
};

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& listen, std::map<std::string, HttpHandler> routes) {
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
  httplib::Server& server = impl->server;
  // SO_REUSEADDR (a restarted server binds at once past TIME_WAIT), but not
  // the library's SO_REUSEPORT: a second server on a taken port must fail,
  // not share it.
  server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server.set_payload_max_length(kMaxRequestBody);
  server.set_read_timeout(kReadTimeoutSeconds);
  server.set_write_timeout(kWriteTimeoutSeconds);
  const std::map<std::string, HttpHandler>* table = &impl->routes;
  server.Get(".*", [table](const httplib::Request& req, httplib::Response& res) {
    auto it = table->find(req.path);
    if (it == table->end()) {
      res.status = 404;
      res.set_content(absl::StrCat("no page at ", req.path, "\n"), "text/plain; charset=utf-8");
      return;
    }
    HttpRequest request;
    request.path = req.path;
    for (const auto& [name, value] : req.params) request.query[name] = value;
    for (const auto& [name, value] : req.headers)
      request.headers[absl::AsciiStrToLower(name)] = value;
    HttpResponse answer = it->second(request);
    res.status = answer.status;
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : answer.headers) res.set_header(name, value);
    res.set_content(std::move(answer.body), answer.content_type.c_str());
  });
  const auto not_allowed = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("only GET and HEAD\n", "text/plain; charset=utf-8");
  };
  server.Post(".*", not_allowed);
  server.Put(".*", not_allowed);
  server.Delete(".*", not_allowed);
  server.Patch(".*", not_allowed);
  int bound = port;
  if (port == 0) {
    bound = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat("--http-listen: cannot listen on ", listen,
                                               " (in use, or not an address "
                                               "of this host)"));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    raw->returned = true;
  });
  // stop() does nothing until the server runs: wait for it, so that a Stop()
  // right after Start() cannot leave the thread accepting forever.
  while (!server.is_running() && !raw->returned) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (raw->returned) {
    raw->thread.join();
    return absl::UnavailableError(absl::StrCat("--http-listen: cannot serve on ", listen));
  }
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(impl), host, bound));
}

HttpEndpoint::HttpEndpoint(std::unique_ptr<Impl> impl, std::string host, int port)
    : impl_(std::move(impl)), host_(std::move(host)), port_(port) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

void HttpEndpoint::Stop() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace autoaccel
