// The live page's side of the session (docs/live.md): the tap made at start, fed by the writer from the chunks
// it drains (no second collection path: application threads never touch it), and the server that reads it.
#include "runtime/session_state.hpp"

#include "live/server.hpp"
#include "live/tap.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// The GPU collector's delivery (lib/collect/cupti): weak, as the collector is built only where the CUDA headers
// are (lib/collect/cupti/CMakeLists.txt); without it the page simply has no GPU part.
extern "C" int inferscope_cupti_deliver() __attribute__((weak));

namespace inferscope::runtime {

namespace {

// How long stop() waits for the server's threads before leaving them behind.
constexpr std::chrono::milliseconds kStopBound{1000};

// How often the writer asks CUPTI for its complete records while the page is served. CUPTI hands buffers over on
// its own only when one is full (8 MB: seconds of a busy model, never for a light one), so the page would show no
// GPU activity until the end. A step waits at most 1 s for its GPU records (live/step_settler.hpp); four
// deliveries a second bring them well inside that, and the page refreshes once a second. The flush runs on the
// writer thread, never on the application's.
constexpr uint64_t kGpuDeliveryNs = 250'000'000;

double rate_of(const std::vector<dump::CalibrationPoint>& calib) {
  if (calib.size() < 2) return 1.0;
  const auto& a = calib.front();
  const auto& b = calib.back();
  if (b.monotonic_ns <= a.monotonic_ns || b.ticks <= a.ticks) return 1.0;
  return double(b.ticks - a.ticks) / double(b.monotonic_ns - a.monotonic_ns);
}

// The server module, beside this library (the build tree and the install put it there), else by name. Loaded
// once and never unloaded: a server left behind by a bounded stop still runs its code.
const live::ModuleApi* load_module(std::string& error) {
  static const live::ModuleApi* api = nullptr;
  if (api) return api;
  std::string path = "libinferscope_live_server.so";
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&load_module), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) path = self.substr(0, slash + 1) + path;
  }
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) h = ::dlopen("libinferscope_live_server.so", RTLD_NOW | RTLD_LOCAL);
  auto entry = h ? reinterpret_cast<const live::ModuleApi* (*)()>(::dlsym(h, "inferscope_live_module")) : nullptr;
  if (!entry) {
    const char* why = ::dlerror();
    error = "live: cannot load " + path + (why ? std::string(": ") + why : std::string()) + "; no live page";
    return nullptr;
  }
  return api = entry();
}

}  // namespace

void make_live_tap(SessionState& s) {
  if (s.cfg.live.empty() || s.progress.calib.empty()) return;
  const uint32_t step = intern(Sampler::step_name(s.cfg));
  s.live.tap = std::make_shared<live::Tap>(step, s.progress.calib.front().ticks, rate_of(s.progress.calib),
                                           [](uint32_t id) { return string_of(id); });
  // Python functions as step candidates while no step is seen (the page says which; docs/live.md).
  s.live.tap->set_code_names([](uint32_t code) { return code_qualname(code); });
}

namespace {

// The live page of a recording that exec'd into this image (same pid): its listening socket and token, handed over
// through the environment (live_handover_environment) so that the URL it printed goes on working (docs/live.md, "One
// page per run").
// Taken out of the environment when the library loads, so the program and its children never see them.
struct Inherited {
  int fd = -1;
  std::string token;
};
Inherited& inherited() {
  static Inherited i;
  return i;
}

constexpr const char* kLiveFdVar = "INFERSCOPE_LIVE_FD";
constexpr const char* kLiveTokenVar = "INFERSCOPE_LIVE_TOKEN";

}  // namespace

void take_inherited_live() {
  const char* fd = std::getenv(kLiveFdVar);
  const char* token = std::getenv(kLiveTokenVar);
  const char* from = std::getenv("INFERSCOPE_EXEC_FROM");
  // Only the image an exec made of the process that served the page takes it: a child that inherited the variables
  // (from a program that copied its environment) has another pid.
  if (fd && from && std::atol(from) == ::getpid()) {
    inherited().fd = std::atoi(fd);
    inherited().token = token ? token : "";
  }
  ::unsetenv(kLiveFdVar);
  ::unsetenv(kLiveTokenVar);
}

void close_unused_inherited_live() {
  if (inherited().fd >= 0) ::close(inherited().fd);
  inherited().fd = -1;
}

void start_live_server(SessionState& s) {
  if (!s.live.tap) return;
  live::Listen where;
  std::string error = live::parse_listen(s.cfg.live, s.cfg.live_any_address, where);
  if (error.empty()) s.live.api = load_module(error);
  const bool adopted = inherited().fd >= 0;
  if (s.live.api) {
    s.live.token = adopted ? inherited().token : s.cfg.live_token ? live::random_token() : std::string();
    std::shared_ptr<const live::Tap> tap = s.live.tap;
    s.live.server = s.live.api->start(where, s.live.token, [tap] { return tap->snapshot(); }, error, inherited().fd);
  }
  if (adopted && !s.live.server) ::close(inherited().fd);
  inherited().fd = -1;
  if (!s.live.server) return log(LogLevel::kError, error + " (recording goes on)");
  // The URL printed before the exec serves this image now: printing another would offer a second page.
  if (adopted) return log(LogLevel::kInfo, std::string("live page: continues at ") + s.live.api->url(s.live.server));
  // Printed whatever the log level: it is what the user asked for, and the only place the token is shown.
  std::fprintf(stderr, "inferscope: live page: %s (metrics: /metrics%s)\n", s.live.api->url(s.live.server),
               s.cfg.live_token ? ", same token" : "");
  std::fflush(stderr);
}

void live_observe(SessionState& s, const std::vector<uint8_t>& chunk) {
  if (!s.live.tap || chunk.size() < sizeof(dump::ChunkHeader) + sizeof(dump::EventsHeader)) return;
  dump::EventsHeader eh;
  std::memcpy(&eh, chunk.data() + sizeof(dump::ChunkHeader), sizeof(eh));
  const size_t head = sizeof(dump::ChunkHeader) + sizeof(dump::EventsHeader);
  s.live.tap->observe(eh.thread_id, chunk.data() + head, chunk.size() - head);
}

void live_after_cycle(SessionState& s, uint64_t dropped_records) {
  if (!s.live.tap) return;
  s.live.tap->set_dropped(dropped_records);
  const uint64_t now = detail::now();
  if (now - s.live.gpu_delivered >= uint64_t(double(kGpuDeliveryNs) * rate_of(s.progress.calib))) {
    if (inferscope_cupti_deliver) inferscope_cupti_deliver();  // drained next cycle; -2 (no GPU session) is fine
    s.live.gpu_delivered = now;
  }
  s.live.tap->advance(now);  // settles the steps whose GPU records have arrived (step_settler.hpp)
  // Names are read again when a thread joins, and every 25 cycles for renames (which bump nothing).
  const uint64_t gen = G().threads_generation.load(std::memory_order_relaxed);
  if (gen == s.live.threads_generation && ++s.live.cycles % 25 != 0) return;
  s.live.threads_generation = gen;
  std::vector<dump::ThreadEntry> threads;
  {
    std::lock_guard lk(G().registry);
    for (auto& [id, t] : s.table.threads) threads.push_back(t);
  }
  for (const dump::ThreadEntry& t : threads)
    s.live.tap->set_thread_name(t.thread_id, t.name ? string_of(t.name) : std::string(), t.os_tid);
}

void stop_live(SessionState& s) {
  if (s.live.tap) s.live.tap->set_state("stopping");
  if (!s.live.server) return;
  if (s.stopping_for_exec) {
    s.live.handed_fd = s.live.api->hand_over(s.live.server, kStopBound.count());
  } else if (!s.live.api->stop(s.live.server, kStopBound.count())) {
    log(LogLevel::kWarn, "live: the server did not stop within 1 s (a client held it); left behind");
  }
  s.live.server = nullptr;
}

std::vector<std::string> live_handover_environment(const SessionState& s) {
  if (s.live.handed_fd < 0) return {};
  return {std::string(kLiveFdVar) + "=" + std::to_string(s.live.handed_fd), std::string(kLiveTokenVar) + "=" + s.live.token};
}

}  // namespace inferscope::runtime
