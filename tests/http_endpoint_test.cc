// The coordinator's HTTP port (server/http/http_endpoint.h) against the habits of
// the internet, over real loopback sockets: bodies refused before they are
// read (chunked or not, and a POST whose body never comes), slow clients that
// never finish a request, a Range header asking for the same bytes a
// thousand times, oversized headers, and a Host header naming someone else.
#include "server/http/http_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A loopback TCP connection to `port`, from source address `from` (any of
// 127.0.0.0/8); -1 when it cannot be made.
int Connect(int port, const char* from = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in source{};
  source.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &source.sin_addr);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof(server)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `data` whole, waiting at most `timeout` for room; false when the
// peer closed or stopped reading.
bool SendAll(int fd, const std::string& data, absl::Duration timeout = absl::Seconds(2)) {
  size_t sent = 0;
  while (sent < data.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return false;
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// What the peer sends until it closes, `stop_after` bytes arrived, or
// `timeout` passed.
std::string Receive(int fd, absl::Duration timeout, size_t stop_after = 64 << 20) {
  std::string got;
  const absl::Time deadline = absl::Now() + timeout;
  char buffer[65536];
  while (got.size() < stop_after) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

// One request on a new connection, and the answer as far as it arrives
// within `timeout` ("" when nothing does).
std::string Exchange(int port, const std::string& request,
                     absl::Duration timeout = absl::Seconds(1), const char* from = "127.0.0.1") {
  const int fd = Connect(port, from);
  if (fd < 0) return "";
  std::string answer;
  if (SendAll(fd, request)) answer = Receive(fd, timeout);
  ::close(fd);
  return answer;
}

std::string BigPage() { return std::string(100 * 1024, 'x'); }

class HttpEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::map<std::string, HttpHandler> routes;
    routes["/healthz"] = [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ok\n"}; };
    routes["/big"] = [](const HttpRequest&) { return HttpResponse{200, "text/plain", BigPage()}; };
    routes["/echo"] = [](const HttpRequest& r) {
      std::string body;
      for (const auto& [name, value] : r.query) absl::StrAppend(&body, name, "=", value, "\n");
      return HttpResponse{200, "text/plain", body};
    };
    auto started = HttpEndpoint::Start("127.0.0.1:0", std::move(routes));
    ASSERT_TRUE(started.ok()) << started.status();
    endpoint_ = *std::move(started);
    port_ = endpoint_->port();
  }

  std::string Healthz(const char* from = "127.0.0.1") {
    return Exchange(port_, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                    absl::Seconds(1), from);
  }

  std::unique_ptr<HttpEndpoint> endpoint_;
  int port_ = 0;
};

TEST_F(HttpEndpointTest, AnswersItsRoutesAndRefusesTheRest) {
  EXPECT_THAT(Healthz(), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(Healthz(), HasSubstr("\r\n\r\nok\n"));
  EXPECT_THAT(Healthz(), HasSubstr("Cache-Control: no-store"));
  EXPECT_THAT(Exchange(port_,
                       "GET /echo?a=1&b=x%20y HTTP/1.1\r\nHost: h\r\n"
                       "Connection: close\r\n\r\n"),
              HasSubstr("a=1\nb=x y\n"));
  EXPECT_THAT(Exchange(port_, "GET /nothing HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"),
              StartsWith("HTTP/1.1 404"));
  const std::string head =
      Exchange(port_, "HEAD /big HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200"));
  EXPECT_LT(head.size(), 1024u) << "HEAD carries no body";
  const std::string put =
      Exchange(port_, "PUT /healthz HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
  EXPECT_THAT(put, StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(put, HasSubstr("Allow: GET, HEAD"));
}

// A chunked body has no length to refuse it by: it is refused before it is
// read, and the connection closed, however long the sender goes on.
TEST_F(HttpEndpointTest, AChunkedBodyIsRefusedBeforeItIsRead) {
  for (const char* method : {"POST", "GET"}) {
    SCOPED_TRACE(method);
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, absl::StrCat(method,
                                         " /healthz HTTP/1.1\r\nHost: h\r\n"
                                         "Transfer-Encoding: chunked\r\n\r\n")));
    const std::string chunk = absl::StrCat("100000\r\n", std::string(0x100000, 'a'), "\r\n");
    // The answer comes without waiting for the body...
    const std::string answer = Receive(fd, absl::Seconds(2), 12);
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 4"));
    // ... and the server reads no more than what its buffers take.
    size_t sent = 0;
    while (sent < (256u << 20) && SendAll(fd, chunk, absl::Seconds(1))) sent += chunk.size();
    EXPECT_LT(sent, 16u << 20) << "the server went on reading the body";
    ::close(fd);
  }
  EXPECT_THAT(Healthz(), StartsWith("HTTP/1.1 200"));
}

// A POST announcing a body that never comes does not hold the server: it is
// answered at once.
TEST_F(HttpEndpointTest, APostWhoseBodyNeverComesIsAnsweredAtOnce) {
  const absl::Time start = absl::Now();
  const std::string answer = Exchange(
      port_, "POST /healthz HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n", absl::Seconds(2));
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 405"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST_F(HttpEndpointTest, AGetWithABodyIsRefusedUnread) {
  const std::string answer =
      Exchange(port_, "GET /healthz HTTP/1.1\r\nHost: h\r\nContent-Length: 100000000\r\n\r\n",
               absl::Seconds(2));
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 413"));
}

// Slowloris: 200 connections that never finish their request do not keep
// /healthz (the liveness probe) waiting, from another address.
TEST_F(HttpEndpointTest, SlowClientsDoNotKeepHealthzWaiting) {
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    const int fd = Connect(port_, "127.0.0.1");
    if (fd < 0) break;
    SendAll(fd, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    slow.push_back(fd);
  }
  EXPECT_EQ(slow.size(), 200u);
  for (int round = 0; round < 3; ++round) {
    const absl::Time start = absl::Now();
    EXPECT_THAT(Healthz("127.0.0.2"), StartsWith("HTTP/1.1 200")) << "round " << round;
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(500));
  }
  for (int fd : slow) ::close(fd);
  // Once the server has seen them go (a loaded machine may take a moment),
  // their address is served again: its per-address slots are free.
  std::string again;
  for (int i = 0; i < 40 && !absl::StartsWith(again, "HTTP/1.1 200"); ++i) {
    if (i > 0) absl::SleepFor(absl::Milliseconds(50));
    again = Healthz();
  }
  EXPECT_THAT(again, StartsWith("HTTP/1.1 200"));
}

// A Range header that names the whole page a thousand times gets the page
// once, not a thousand copies.
TEST_F(HttpEndpointTest, ManyRangesDoNotMultiplyTheAnswer) {
  std::string ranges = "bytes=0-";
  for (int i = 0; i < 1000; ++i) ranges += ",0-";
  const std::string answer =
      Exchange(port_,
               absl::StrCat("GET /big HTTP/1.1\r\nHost: h\r\nRange: ", ranges,
                            "\r\nConnection: close\r\n\r\n"),
               absl::Seconds(2));
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200"));
  EXPECT_LT(answer.size(), BigPage().size() + 1024);
}

TEST_F(HttpEndpointTest, AnOversizedHeaderIsRefused) {
  const std::string answer = Exchange(port_,
                                      absl::StrCat("GET /healthz HTTP/1.1\r\nHost: h\r\nX-Big: ",
                                                   std::string(256 << 10, 'b'), "\r\n\r\n"),
                                      absl::Seconds(2));
  EXPECT_FALSE(absl::StartsWith(answer, "HTTP/1.1 200"));
  EXPECT_THAT(Healthz(), StartsWith("HTTP/1.1 200"));
}

// Without user tokens the endpoint checks the Host header: a browser page of
// another site whose name was rebound to this address names that site.
TEST(HttpEndpointHostCheck, AForeignHostNameIsRefusedWhenAsked) {
  std::map<std::string, HttpHandler> routes;
  routes["/api/jobs"] = [](const HttpRequest&) { return HttpResponse{200, "text/plain", "[]"}; };
  HttpEndpointOptions options;
  options.check_host = true;
  options.allowed_hosts = {"Coordinator.Example"};
  auto started = HttpEndpoint::Start("127.0.0.1:0", std::move(routes), options);
  ASSERT_TRUE(started.ok()) << started.status();
  const int port = (*started)->port();
  const auto get = [port](const std::string& host) {
    return Exchange(port, absl::StrCat("GET /api/jobs HTTP/1.1\r\nHost: ", host,
                                       "\r\nConnection: close\r\n\r\n"));
  };
  EXPECT_THAT(get("evil.example"), StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(get("evil.example:8080"), StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(get(absl::StrCat("127.0.0.1:", port)), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(get("localhost"), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(get("[::1]:80"), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(get("coordinator.example:443"), StartsWith("HTTP/1.1 200"));
}

TEST(HttpEndpointHostCheck, NamesAndAddresses) {
  EXPECT_TRUE(HostHeaderAllowed("10.1.2.3", {}));
  EXPECT_TRUE(HostHeaderAllowed("10.1.2.3:8080", {}));
  EXPECT_TRUE(HostHeaderAllowed("[fe80::1]:8080", {}));
  EXPECT_TRUE(HostHeaderAllowed("LOCALHOST:1", {}));
  EXPECT_FALSE(HostHeaderAllowed("localhost.evil.example", {}));
  EXPECT_FALSE(HostHeaderAllowed("[not-an-address]", {}));
  EXPECT_FALSE(HostHeaderAllowed("10.1.2.3.evil.example", {}));
  EXPECT_TRUE(HostHeaderAllowed("dash.example", {"dash.example"}));
}

TEST(HttpEndpointTls, HalfATlsPairOrAMissingFileIsAClearError) {
  HttpEndpointOptions options;
  options.tls_cert_file = "/nonexistent/cert.pem";
  auto half = HttpEndpoint::Start("127.0.0.1:0", {}, options);
  ASSERT_FALSE(half.ok());
  EXPECT_THAT(std::string(half.status().message()), HasSubstr("go together"));
  options.tls_key_file = "/nonexistent/key.pem";
  auto missing = HttpEndpoint::Start("127.0.0.1:0", {}, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("--http-tls-cert: cannot read '/nonexistent/cert.pem'"));
}

}  // namespace
}  // namespace autoaccel
