#include "live/server.hpp"

#include "live/gate.hpp"
#include "live/render.hpp"

#include <httplib.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

extern "C" int __cxa_atexit(void (*f)(void*), void* arg, void* dso);
extern "C" void* __dso_handle;

namespace inferscope::live {

namespace {

using Clock = std::chrono::steady_clock;

// Two workers are plenty for a page and a scraper: they only ever see requests whose head has arrived (gate.hpp),
// so a slow client cannot hold one while it sends.
constexpr int kWorkers = 2;
// An answer is written within this, whole, or the connection is closed: a client that does not read holds a worker
// for at most this long. Also what a stop waits for a worker, within its own bound.
constexpr std::chrono::milliseconds kWriteDeadline{1000};
// At exit, how long the server's threads are waited for before the process's statics are destroyed (see exit, below).
constexpr std::chrono::seconds kExitBound{10};

// Compares in time independent of where the strings differ.
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

// cpp-httplib's part: it parses a request head, routes it and writes the answer, to a Stream we give it.
class Routes : public httplib::Server {
 public:
  void answer(httplib::Stream& stream) {
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, nullptr);  // one request per connection
  }
};

std::string numeric_address(const sockaddr_storage& a, int& port) {
  char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&a), sizeof(a), host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  port = std::atoi(serv);
  return host;
}

// A request head the gate read whole, and its socket: httplib reads the head from memory and nothing more (no body
// is accepted), and writes its answer to the socket within one deadline for the whole answer, not one per send.
class HeadStream : public httplib::Stream {
 public:
  HeadStream(int fd, std::string head) : fd_(fd), head_(std::move(head)), deadline_(Clock::now() + kWriteDeadline) {}

  bool is_readable() const override { return at_ < head_.size(); }
  bool is_writable() const override { return Clock::now() < deadline_; }
  ssize_t read(char* ptr, size_t size) override {
    size = std::min(size, head_.size() - at_);
    std::memcpy(ptr, head_.data() + at_, size);
    at_ += size;
    return ssize_t(size);
  }
  ssize_t write(const char* ptr, size_t size) override {
    size_t sent = 0;
    while (sent < size) {
      // MSG_NOSIGNAL: a client that went away is an error here, never a SIGPIPE in the program.
      const ssize_t n = ::send(fd_, ptr + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        sent += size_t(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      pollfd p{fd_, POLLOUT, 0};
      if (left <= 0 || ::poll(&p, 1, int(left)) <= 0) return -1;
    }
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = numeric_address(a, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = numeric_address(a, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  std::string head_;
  size_t at_ = 0;
  Clock::time_point deadline_;
};

// A request answered in memory: what builds httplib's function-local statics before any worker runs (see exit, below).
class MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string in) : in_(std::move(in)) {}
  bool is_readable() const override { return at_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size = std::min(size, in_.size() - at_);
    std::memcpy(ptr, in_.data() + at_, size);
    at_ += size;
    return ssize_t(size);
  }
  ssize_t write(const char*, size_t size) override { return ssize_t(size); }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
  socket_t socket() const override { return -1; }

 private:
  std::string in_;
  size_t at_ = 0;
};

// A listening socket on `where` (a name such as localhost resolved as the system does), -1 with `error` set.
int bind_listener(const Listen& where, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(where.host.c_str(), std::to_string(where.port).c_str(), &hints, &found) != 0) found = nullptr;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  if (found) ::freeaddrinfo(found);
  if (fd < 0)
    error = "live: cannot listen on " + url_host(where.host) + ":" + std::to_string(where.port) +
            " (in use, or not an address of this machine); no live page";
  return fd;
}

// A listening socket handed over by the image an exec replaced: checked, and made private to this image again.
int adopt_listener(int fd, std::string& error) {
  int listening = 0;
  socklen_t len = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
    error = "live: descriptor " + std::to_string(fd) + " handed over by exec is not a listening socket; no live page";
    return -1;
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

int port_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  int port = 0;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) numeric_address(a, port);
  return port;
}

GateLimits gate_limits() {
  GateLimits limits;
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    limits.max_waiting = waiting_cap_for(size_t(nofile.rlim_cur));
  return limits;
}

// The signals a program's own threads take (a sigwait() thread, the runtime's SIGTERM handler, Python's handlers):
// the server's threads never take one, as the writer does not.
sigset_t program_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGCHLD, SIGWINCH})
    sigaddset(&set, sig);
  return set;
}

// --- exit ---------------------------------------------------------------------------------------------------------
//
// exit() runs the atexit handlers and destroys statics in the reverse order of their registration, all in one list.
// httplib builds function-local statics on first use (parse_request_line's set of methods), so a worker's first
// request registered them after the runtime's own atexit handler: whenever that handler had not ended the workers
// (its stop is bounded to 1 s; under ThreadSanitizer the statics went first outright), they were destroyed while a
// worker still parsed a request: ThreadSanitizer under live_stress.py reported operator delete in exit() against
// memcmp in a worker, then a heap-use-after-free, in 7 of 8 runs and 6 of 6. That is the likely cause of the SIGSEGV
// after "dump written" seen once in 18 runs under load, with the program's last line of output lost. Now the first
// server builds those statics before its workers start (a request answered in memory), then registers, once per
// process, a handler that ends every server's threads: registered after the statics, it runs before they go.
struct ServingList {
  std::mutex mu;
  std::vector<std::weak_ptr<Server::Impl>> impls;
};
ServingList& serving() {
  static ServingList* s = new ServingList;  // never destroyed: exit handlers and servers' threads use it
  return *s;
}
void stop_all_at_exit();

void prepare_for_exit(Routes& routes) {
  static std::once_flag once;
  std::call_once(once, [&routes] {
    MemoryStream warm("GET /warm-up?q=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    routes.answer(warm);
    // __cxa_atexit with this module's handle, as the compiler registers a static's destructor: the same list and the
    // same treatment (ThreadSanitizer ran a plain atexit() handler at another place in the order than the statics').
    __cxa_atexit([](void*) { stop_all_at_exit(); }, nullptr, &__dso_handle);
  });
}

// A server joins the list its exit handler stops (expired entries are dropped as new ones come).
void add_serving(const std::shared_ptr<Server::Impl>& impl) {
  std::lock_guard lk(serving().mu);
  auto& v = serving().impls;
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& w) { return w.expired(); }), v.end());
  v.push_back(impl);
}

}  // namespace

struct Server::Impl {
  Routes routes;
  std::unique_ptr<Gate> gate;
  int listener = -1;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;            // threads not yet ended, guarded by mu
  std::vector<int> answering;  // the workers' connections, guarded by mu
  bool ending = false;         // end_answers() was called, guarded by mu

  void ended() {
    std::lock_guard lk(mu);
    --running;
    cv.notify_all();
  }
  void serve_requests() {
    ReadyRequest r;
    while (gate->next(r)) {
      {
        std::lock_guard lk(mu);
        if (ending) {
          ::close(r.fd);
          return;
        }
        answering.push_back(r.fd);
      }
      HeadStream stream(r.fd, std::move(r.head));
      routes.answer(stream);
      ::shutdown(r.fd, SHUT_WR);
      std::lock_guard lk(mu);
      answering.erase(std::find(answering.begin(), answering.end(), r.fd));
      ::close(r.fd);
    }
  }
  // A stop ends the answers being written: a client that does not read never holds the stop, and no thread of ours
  // is left running while the process exits (see exit, above).
  void end_answers() {
    std::lock_guard lk(mu);
    ending = true;
    for (int fd : answering) ::shutdown(fd, SHUT_RDWR);
  }
  // Asks the threads to end and waits for them until `deadline`; true when they all did.
  bool end_threads(Clock::time_point deadline) {
    gate->stop();
    end_answers();
    std::unique_lock lk(mu);
    return cv.wait_until(lk, deadline, [&] { return running == 0; });
  }
};

namespace {

void stop_all_at_exit() {
  std::vector<std::shared_ptr<Server::Impl>> live;
  {
    std::lock_guard lk(serving().mu);
    for (auto& w : serving().impls)
      if (auto impl = w.lock()) live.push_back(std::move(impl));
  }
  // Longer than a stop's bound: nothing a client does can hold a thread now (the gate's loop ends within its poll
  // period, the answers being written are shut), only CPU time on a loaded machine, and a thread still running when
  // the statics go is the crash this prevents.
  const auto deadline = Clock::now() + kExitBound;
  for (auto& impl : live) impl->end_threads(deadline);
}

}  // namespace

std::unique_ptr<Server> Server::start(const Listen& where, const std::string& token, std::function<Snapshot()> tap,
                                      std::string& error, int listener) {
  // httplib::Server's constructor ignores SIGPIPE for the whole process, which changes what the program's own writes
  // to a closed pipe do: the disposition the program had is put back (this server never needs it: MSG_NOSIGNAL).
  struct sigaction sigpipe{};
  ::sigaction(SIGPIPE, nullptr, &sigpipe);
  auto impl = std::make_shared<Impl>();
  ::sigaction(SIGPIPE, &sigpipe, nullptr);
  auto allowed = [token](const httplib::Request& req, httplib::Response& res) {
    if (token.empty() || same_token(req.get_param_value("token"), token)) return true;
    res.status = 401;
    res.set_content("a token is required: use the URL the program printed on stderr (?token=...)\n", "text/plain");
    return false;
  };
  auto& routes = impl->routes;
  routes.set_payload_max_length(0);  // a second line of defence: the gate refuses every head that announces a body
  routes.Get("/", [allowed, token](const httplib::Request& req, httplib::Response& res) {
    if (allowed(req, res)) res.set_content(render_page(token), "text/html; charset=utf-8");
  });
  routes.Get("/data", [allowed, tap](const httplib::Request& req, httplib::Response& res) {
    if (allowed(req, res)) res.set_content(render_data_json(tap()), "application/json");
  });
  routes.Get("/metrics", [allowed, tap](const httplib::Request& req, httplib::Response& res) {
    if (allowed(req, res)) res.set_content(render_metrics(tap()), "text/plain; version=0.0.4; charset=utf-8");
  });
  impl->listener = listener >= 0 ? adopt_listener(listener, error) : bind_listener(where, error);
  if (impl->listener < 0) return nullptr;
  impl->gate = std::make_unique<Gate>(impl->listener, gate_limits());
  prepare_for_exit(impl->routes);  // before any worker runs httplib (see exit, above)
  add_serving(impl);
  const sigset_t blocked = program_signals();
  sigset_t old;
  ::pthread_sigmask(SIG_BLOCK, &blocked, &old);  // inherited by the threads made here
  impl->running = 1 + kWorkers;
  impl->threads.emplace_back([impl] {
    pthread_setname_np(pthread_self(), "iscope-live");
    impl->gate->run();
    impl->ended();
  });
  for (int i = 0; i < kWorkers; ++i)
    impl->threads.emplace_back([impl] {
      pthread_setname_np(pthread_self(), "iscope-live-w");
      impl->serve_requests();
      impl->ended();
    });
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  std::unique_ptr<Server> s(new Server);
  s->impl_ = impl;
  s->port_ = port_of(impl->listener);
  s->url_ = "http://" + url_host(where.host) + ":" + std::to_string(s->port_) + "/" +
            (token.empty() ? "" : "?token=" + token);
  return s;
}

bool Server::finish(std::chrono::milliseconds bound) {
  if (!impl_) return true;
  const bool done = impl_->end_threads(Clock::now() + bound);
  // Left behind, the threads keep `impl_` alive through their own references; the process may exit meanwhile.
  for (std::thread& t : impl_->threads) done ? t.join() : t.detach();
  impl_.reset();
  return done;
}

bool Server::stop(std::chrono::milliseconds bound) { return finish(bound); }

int Server::hand_over(std::chrono::milliseconds bound) {
  if (!impl_) return -1;
  const int fd = impl_->listener;
  impl_->gate->keep_listener();
  finish(bound);
  ::fcntl(fd, F_SETFD, 0);  // inherited by the image the exec makes
  return fd;
}

Server::~Server() { stop(std::chrono::milliseconds(2000)); }

namespace {

Server* module_start(const Listen& where, const std::string& token, std::function<Snapshot()> source,
                     std::string& error, int listener) {
  return Server::start(where, token, std::move(source), error, listener).release();
}
const char* module_url(const Server* s) { return s->url().c_str(); }
bool module_stop(Server* s, int64_t bound_ms) {
  const bool done = s->stop(std::chrono::milliseconds(bound_ms));
  delete s;
  return done;
}
int module_hand_over(Server* s, int64_t bound_ms) {
  const int fd = s->hand_over(std::chrono::milliseconds(bound_ms));
  delete s;
  return fd;
}
constexpr ModuleApi kApi{module_start, module_url, module_stop, module_hand_over};

}  // namespace

}  // namespace inferscope::live

extern "C" __attribute__((visibility("default"))) const inferscope::live::ModuleApi* inferscope_live_module() {
  return &inferscope::live::kApi;
}
