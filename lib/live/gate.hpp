// The live server's front door (docs/live.md, "Hostile clients"): one thread accepts connections and holds each,
// without a worker, until its request head has arrived whole; only then does a worker see it. So a client that
// trickles its request a byte at a time, or sends nothing, holds a descriptor and a few KiB until its deadline,
// never one of the workers that answer the page, /data and /metrics; a client that announces a body is refused
// before a byte of the body is read.
//
// cpp-httplib 0.11.4 (Debian 12) cannot do this itself: its accept loop hands every connection to a worker at once,
// its read timeout applies to each receive (a byte every 0.5 s never times out), and it reads a body whole into
// memory (a chunked one whatever its size) before it routes the request. It still parses, routes and answers the
// heads handed over here (server.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

namespace inferscope::live {

struct GateLimits {
  size_t max_head_bytes = 8192;                     ///< request line and headers, CRLF CRLF included
  std::chrono::milliseconds head_deadline{2000};    ///< from accept to the end of the head
  std::chrono::milliseconds linger{1000};           ///< a refused client's chance to read why, at most
  size_t max_waiting = 128;                         ///< connections whose head is incomplete (oldest closed first)
  size_t max_ready = 32;                            ///< complete heads waiting for a worker (503 beyond)
};

/// How many connections may wait for their head when the process may open `fd_limit` descriptors: an eighth of
/// them, 4 to 128, so hostile clients never take the program's descriptors away.
size_t waiting_cap_for(size_t fd_limit);

/// A request whose head arrived whole and announces no body: what a worker answers.
struct ReadyRequest {
  int fd = -1;
  std::string head;
};

/// Whether `head` (request line and headers, CRLF CRLF included) announces a body: a Content-Length other than 0,
/// or any Transfer-Encoding.
bool declares_body(std::string_view head);

class Gate {
 public:
  /// Takes `listen_fd`, a listening socket (made non-blocking here).
  Gate(int listen_fd, GateLimits limits);
  ~Gate();
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  /// Accepts and reads heads until stop(); then closes every connection it holds, and the listening socket unless
  /// keep_listener() was called.
  void run();
  /// From any thread: run() returns within its poll period (100 ms), next() returns false.
  void stop();
  /// run() will leave the listening socket open (it is handed to the program an exec makes: docs/live.md).
  void keep_listener();

  /// Worker side: waits for a complete request; false once stopped. The caller owns `out.fd`.
  bool next(ReadyRequest& out);

 private:
  struct Waiting;
  void accept_new(std::deque<Waiting>& waiting);
  bool read_head(Waiting& w);  // false when the connection is done with (handed over, refused or closed)
  void expire(std::deque<Waiting>& waiting);
  void refuse(Waiting& w, std::string_view response);
  void queue_for_worker(Waiting& w);

  int listen_fd_;
  GateLimits limits_;
  std::chrono::steady_clock::time_point accept_paused_until_{};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ReadyRequest> ready_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  bool keep_listener_ = false;      // guarded by mu_
};

}  // namespace inferscope::live
