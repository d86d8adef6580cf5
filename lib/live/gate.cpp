#include "live/gate.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <vector>

namespace inferscope::live {

namespace {

using Clock = std::chrono::steady_clock;

// How long poll() sleeps at most: the bound on noticing stop() and on a deadline passing.
constexpr std::chrono::milliseconds kPollPeriod{100};
// What a refused client may still send while it reads why (a body already in flight) before it is cut off.
constexpr size_t kLingerDiscardBytes = 1u << 20;

// The answers the gate gives itself, each closing its connection. Never destroyed: exit() destroys a module's
// statics while its threads may still run (server.cpp, "exit").
const std::string& answer(std::string_view status, std::string_view body) {
  return *new std::string("HTTP/1.1 " + std::string(status) +
                          "\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + std::string(body));
}
const std::string& kTooLarge = answer("413 Payload Too Large", "the live page takes no request bodies: GET only\n");
const std::string& kHeadTooLarge = answer("431 Request Header Fields Too Large", "the request line and headers are too large\n");
const std::string& kTimeout = answer("408 Request Timeout", "the request head did not arrive in time\n");
const std::string& kBusy = answer("503 Service Unavailable", "too many connections; try again\n");

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Never blocks and never raises SIGPIPE in the program: a refusal is best effort.
void send_now(int fd, std::string_view bytes) {
  [[maybe_unused]] ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

size_t waiting_cap_for(size_t fd_limit) { return std::clamp<size_t>(fd_limit / 8, 4, 128); }

bool declares_body(std::string_view head) {
  size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const size_t end = head.find("\r\n", at + 2);
    const std::string_view line = head.substr(at + 2, (end == std::string_view::npos ? head.size() : end) - at - 2);
    at = end;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = lower(trim(line.substr(0, colon)));
    if (name == "transfer-encoding") return true;
    if (name == "content-length" && trim(line.substr(colon + 1)) != "0") return true;
  }
  return false;
}

struct Gate::Waiting {
  int fd = -1;
  Clock::time_point deadline;
  std::string head;
  bool lingering = false;  // refused: the answer is sent, what the client still sends is read and dropped
  size_t discarded = 0;
};

Gate::Gate(int listen_fd, GateLimits limits) : listen_fd_(listen_fd), limits_(limits) {
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
}

Gate::~Gate() {
  std::lock_guard lk(mu_);
  for (ReadyRequest& r : ready_) ::close(r.fd);
}

void Gate::stop() {
  std::lock_guard lk(mu_);
  stopping_ = true;
  cv_.notify_all();
}

void Gate::keep_listener() {
  std::lock_guard lk(mu_);
  keep_listener_ = true;
}

bool Gate::next(ReadyRequest& out) {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return stopping_ || !ready_.empty(); });
  if (stopping_) return false;
  out = std::move(ready_.front());
  ready_.pop_front();
  return true;
}

void Gate::refuse(Waiting& w, std::string_view response) {
  send_now(w.fd, response);
  // Closing a socket with unread data resets it, and the client may never read the answer: it is given until the
  // linger deadline, its further bytes read and dropped, to take it.
  ::shutdown(w.fd, SHUT_WR);
  w.lingering = true;
  w.deadline = Clock::now() + limits_.linger;
}

void Gate::queue_for_worker(Waiting& w) {
  {
    std::lock_guard lk(mu_);
    if (ready_.size() < limits_.max_ready) {
      ready_.push_back({w.fd, std::move(w.head)});
      w.fd = -1;
      cv_.notify_one();
      return;
    }
  }
  refuse(w, kBusy);
}

void Gate::accept_new(std::deque<Waiting>& waiting) {
  if (Clock::now() < accept_paused_until_) return;
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the program's need comes first; try again a poll period later rather than spin on a
      // listening socket that stays readable.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until_ = Clock::now() + kPollPeriod;
      return;
    }
    // At the cap the oldest waiting connection makes room: a client that sends its head at once (every browser and
    // scraper) is never shut out by clients that hold connections open.
    if (waiting.size() >= limits_.max_waiting) {
      send_now(waiting.front().fd, kBusy);
      ::close(waiting.front().fd);
      waiting.pop_front();
    }
    waiting.push_back({fd, Clock::now() + limits_.head_deadline, {}, false, 0});
  }
}

bool Gate::read_head(Waiting& w) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(w.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;  // closed by the client, or an error
    if (w.lingering) {
      w.discarded += size_t(n);
      if (w.discarded > kLingerDiscardBytes) return false;
      continue;
    }
    w.head.append(buf, size_t(n));
    const size_t end = w.head.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (w.head.size() > limits_.max_head_bytes) refuse(w, kHeadTooLarge);
      continue;
    }
    if (end + 4 > limits_.max_head_bytes) {
      refuse(w, kHeadTooLarge);
    } else if (declares_body(std::string_view(w.head).substr(0, end + 4))) {
      refuse(w, kTooLarge);  // before a byte of the body is read
    } else {
      w.head.resize(end + 4);  // one request per connection: anything after the head is not read
      queue_for_worker(w);
      return w.lingering;  // handed over (fd taken), or refused because the workers' queue was full
    }
  }
}

void Gate::expire(std::deque<Waiting>& waiting) {
  const auto now = Clock::now();
  for (Waiting& w : waiting) {
    if (w.fd < 0 || now < w.deadline) continue;
    if (!w.lingering) {
      refuse(w, kTimeout);
      continue;
    }
    ::close(w.fd);
    w.fd = -1;
  }
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(), [](const Waiting& w) { return w.fd < 0; }),
                waiting.end());
}

void Gate::run() {
  std::deque<Waiting> waiting;
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stopping_) break;
    }
    fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
    for (const Waiting& w : waiting) fds.push_back({w.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), int(kPollPeriod.count())) < 0 && errno != EINTR) break;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Waiting& w = waiting[i - 1];
      if (!read_head(w)) {
        if (w.fd >= 0) ::close(w.fd);
        w.fd = -1;
      }
    }
    expire(waiting);  // also drops the connections closed or handed over above
    if (fds[0].revents) accept_new(waiting);
  }
  for (Waiting& w : waiting) ::close(w.fd);
  std::lock_guard lk(mu_);
  if (!keep_listener_) ::close(listen_fd_);
}

}  // namespace inferscope::live
