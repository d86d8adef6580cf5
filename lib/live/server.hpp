// The live server (docs/live.md): the page, its data and /metrics over HTTP (cpp-httplib), on its own threads,
// reading a tap's snapshots only. Stopping it is bounded: a browser that keeps a connection open never holds
// the program's exit.
#pragma once

#include "live/tap.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace inferscope::live {

struct Listen {
  std::string host = "127.0.0.1";
  int port = 0;
};

/// Parses `live` ("PORT" or "ADDR:PORT", "[::1]:PORT"); returns an error, "" when fine. A host that is not
/// loopback is refused unless `any_address`.
std::string parse_listen(const std::string& spec, bool any_address, Listen& out);
/// Whether `host` names the loopback interface (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);
/// `host` as a URL writes it (an IPv6 address in brackets).
std::string url_host(const std::string& host);
/// A fresh random token (32 hex digits, from getrandom).
std::string random_token();

class Server {
 public:
  /// Binds and starts serving; nullptr with `error` set when it cannot bind. `token` "" = none required.
  /// `source` gives a fresh snapshot (called on the server's threads). `listener`: a listening socket to serve on
  /// instead of binding one (the one a recording handed to the program it exec'd: docs/live.md), or -1.
  static std::unique_ptr<Server> start(const Listen& where, const std::string& token,
                                       std::function<Snapshot()> source, std::string& error, int listener = -1);
  ~Server();
  /// The URL of the page, token included.
  const std::string& url() const { return url_; }
  int port() const { return port_; }
  /// Stops serving; waits at most `bound` for the server's threads, then leaves them behind (detached).
  /// True when they had finished.
  bool stop(std::chrono::milliseconds bound);
  /// Stops serving as stop() does, but leaves the listening socket open and inheritable across exec; returns it
  /// (-1 when there is none), for the program an exec makes to serve on.
  int hand_over(std::chrono::milliseconds bound);

  /// The module's state behind a server (server.cpp), opaque here; public so that the module's exit handler can
  /// reach every server still serving.
  struct Impl;

 private:
  Server() = default;
  bool finish(std::chrono::milliseconds bound);
  std::shared_ptr<Impl> impl_;
  std::string url_;
  int port_ = 0;
};

// The module's entry points (libinferscope_live_server.so, loaded by the runtime with dlopen only when `live`
// is set, so a session without it never loads the HTTP library nor what Debian's build of it links: OpenSSL,
// zlib, brotli). Both sides are built together from these headers.
struct ModuleApi {
  Server* (*start)(const Listen& where, const std::string& token, std::function<Snapshot()> source,
                   std::string& error, int listener);
  const char* (*url)(const Server* server);
  bool (*stop)(Server* server, int64_t bound_ms);       // stops and frees the server
  int (*hand_over)(Server* server, int64_t bound_ms);  // stops and frees it, returns its listening socket
};

}  // namespace inferscope::live

extern "C" const inferscope::live::ModuleApi* inferscope_live_module();
