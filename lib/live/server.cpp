#include "live/server.hpp"

#include "live/render.hpp"

#include <httplib.h>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace inferscope::live {

namespace {

// Compares in time independent of where the strings differ.
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}


}  // namespace

struct Server::Impl {
  httplib::Server http;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;

  // httplib's stop() acts only once the listening loop runs (`is_running()`): one called before the server's
  // thread got there did nothing, and that thread then served until the process ended. A session stopped right
  // after it started (a short program: `iscope-run --live 0 -- /bin/true`) waited the whole bound, said a client
  // held the server, and left the port taken. Waits, until `deadline`, for the loop to run or the thread to end.
  void wait_until_listening(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lk(mu);
    while (!http.is_running() && !finished && std::chrono::steady_clock::now() < deadline)
      cv.wait_for(lk, std::chrono::milliseconds(1));
  }
};

std::unique_ptr<Server> Server::start(const Listen& where, const std::string& token, std::function<Snapshot()> tap,
                                      std::string& error) {
  auto impl = std::make_shared<Impl>();
  auto& http = impl->http;
  // Two workers are plenty for a page and a scraper; short timeouts so a stop never waits long on a client.
  http.new_task_queue = [] { return new httplib::ThreadPool(2); };
  http.set_keep_alive_timeout(1);
  http.set_read_timeout(1, 0);
  http.set_write_timeout(1, 0);
  auto allowed = [token](const httplib::Request& req, httplib::Response& res) {
    if (token.empty() || same_token(req.get_param_value("token"), token)) return true;
    res.status = 401;
    res.set_content("a token is required: use the URL the program printed on stderr (?token=...)\n", "text/plain");
    return false;
  };
  http.Get("/", [allowed, token](const httplib::Request& req, httplib::Response& res) {
    if (allowed(req, res)) res.set_content(render_page(token), "text/html; charset=utf-8");
  });
  http.Get("/data", [allowed, tap](const httplib::Request& req, httplib::Response& res) {
    if (allowed(req, res)) res.set_content(render_data_json(tap()), "application/json");
  });
  http.Get("/metrics", [allowed, tap](const httplib::Request& req, httplib::Response& res) {
    if (allowed(req, res)) res.set_content(render_metrics(tap()), "text/plain; version=0.0.4; charset=utf-8");
  });
  int port = where.port;
  if (port == 0) port = http.bind_to_any_port(where.host);
  else if (!http.bind_to_port(where.host, port)) port = -1;
  if (port <= 0) {
    error = "live: cannot listen on " + url_host(where.host) + ":" + std::to_string(where.port) +
            " (in use, or not an address of this machine); no live page";
    return nullptr;
  }
  impl->thread = std::thread([impl] {
    pthread_setname_np(pthread_self(), "iscope-live");
    impl->http.listen_after_bind();
    std::lock_guard lk(impl->mu);
    impl->finished = true;
    impl->cv.notify_all();
  });
  std::unique_ptr<Server> s(new Server);
  s->impl_ = impl;
  s->port_ = port;
  s->url_ = "http://" + url_host(where.host) + ":" + std::to_string(port) + "/" + (token.empty() ? "" : "?token=" + token);
  return s;
}

bool Server::stop(std::chrono::milliseconds bound) {
  if (!impl_) return true;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  impl_->wait_until_listening(deadline);
  impl_->http.stop();
  bool done;
  {
    std::unique_lock lk(impl_->mu);
    done = impl_->cv.wait_until(lk, deadline, [&] { return impl_->finished; });
  }
  // Left behind, the thread keeps `impl_` alive through its own reference; the process may exit meanwhile.
  if (done) impl_->thread.join();
  else impl_->thread.detach();
  impl_.reset();
  return done;
}

Server::~Server() { stop(std::chrono::milliseconds(2000)); }

namespace {

Server* module_start(const Listen& where, const std::string& token, std::function<Snapshot()> source,
                     std::string& error) {
  return Server::start(where, token, std::move(source), error).release();
}
const char* module_url(const Server* s) { return s->url().c_str(); }
bool module_stop(Server* s, int64_t bound_ms) {
  const bool done = s->stop(std::chrono::milliseconds(bound_ms));
  delete s;
  return done;
}
constexpr ModuleApi kApi{module_start, module_url, module_stop};

}  // namespace

}  // namespace inferscope::live

extern "C" __attribute__((visibility("default"))) const inferscope::live::ModuleApi* inferscope_live_module() {
  return &inferscope::live::kApi;
}
