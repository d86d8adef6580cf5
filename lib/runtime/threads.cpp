// The session's thread table: each recording thread bound to its own ring and entry, the names threads give
// themselves or are given from outside, entries for OS threads a collector sees first, and a thread's exit.
// Rings are owned by the process-wide registry, not by threads: a thread that exits marks its ring retired
// and the writer frees it once drained, so nothing a thread recorded is lost when it exits.
#include "runtime/session_state.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

namespace inferscope::runtime {

uint32_t os_tid() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

RingEntry* make_ring(uint64_t bytes) {
  uint64_t cap = 64 * 1024;
  while (cap < bytes) cap <<= 1;
  auto* e = new RingEntry;
  // Touch every page now, on the slow path: a first-touch page fault every 170 records would otherwise
  // land on the recording thread's hot path.
  e->storage.reset(new uint8_t[cap]());
  e->data = e->storage.get();
  e->capacity = cap;
  e->mask = cap - 1;
  return e;
}

thread_local std::string t_thread_name;
thread_local bool t_is_writer = false;  // the writer waits for nobody: only it makes room in the rings
thread_local bool t_exiting = false;
std::atomic<ThreadExitHook> g_thread_exit_hook{nullptr};

struct ExitGuard {
  RingEntry* entry = nullptr;
  ~ExitGuard();
};
thread_local ExitGuard t_exit_guard;

namespace {

// The calling thread's names, interned before a bind takes the registry lock: the one it gave itself
// (set_thread_name) and the kernel's. A name given from outside (waiting_names) comes between the two.
struct OwnNames {
  uint32_t given = 0, kernel = 0;
};
OwnNames names_for_new_thread() {
  OwnNames n;
  if (!t_thread_name.empty()) n.given = intern(t_thread_name);
  char buf[64] = {};
  if (pthread_getname_np(pthread_self(), buf, sizeof(buf)) == 0 && buf[0]) n.kernel = intern(buf);
  return n;
}

// The name OS thread `tid` binds with (registry lock held); a waiting name is used up.
uint32_t bind_name(SessionState& s, uint32_t tid, const OwnNames& own) {
  uint32_t waiting = 0;
  if (auto w = s.table.waiting_names.find(tid); w != s.table.waiting_names.end()) {
    waiting = w->second;
    s.table.waiting_names.erase(w);
  }
  return own.given ? own.given : waiting ? waiting : own.kernel;
}

}  // namespace

uint32_t current_thread_id() {
  const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
  if (e == 0) return 0;
  if (detail::t_state.epoch != e && !detail::bind_thread(e)) return 0;
  return static_cast<RingEntry*>(detail::t_state.ring)->thread_id;
}

std::vector<std::pair<uint32_t, uint32_t>> session_threads() {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  Global& g = G();
  std::lock_guard lk(g.registry);
  SessionState* s = g.session;
  if (!s || detail::g_session.load() != s->epoch) return out;
  out.reserve(s->table.threads.size());
  for (auto& [id, t] : s->table.threads)
    if (!(t.flags & (dump::kThreadChannel | dump::kThreadExited)) && t.os_tid) out.emplace_back(t.os_tid, id);
  return out;
}

namespace {

// The session's entry for OS thread `tid`: the live one, else the newest that exited (CUPTI delivers a thread's
// calls up to a flush period late, at exit often after the thread's own end was recorded); 0 when none
// (registry lock held).
uint32_t thread_with_os_tid(const SessionState& s, uint32_t tid) {
  uint32_t exited = 0;
  uint64_t exited_first = 0;
  for (auto& [id, t] : s.table.threads) {
    if (t.os_tid != tid || (t.flags & dump::kThreadChannel)) continue;
    if (!(t.flags & dump::kThreadExited)) return id;
    if (!exited || t.first_ts >= exited_first) exited = id, exited_first = t.first_ts;
  }
  return exited;
}

// The session's live entry for OS thread `tid`, 0 when none (registry lock held).
uint32_t live_thread_with_os_tid(const SessionState& s, uint32_t tid) {
  for (auto& [id, t] : s.table.threads)
    if (t.os_tid == tid && !(t.flags & (dump::kThreadChannel | dump::kThreadExited))) return id;
  return 0;
}

// The kernel's name of a thread of this process ("" when it exited or /proc is not readable).
std::string task_comm(uint32_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

uint32_t thread_for_os_tid(uint32_t tid) {
  if (tid == 0) return 0;
  Global& g = G();
  auto running = [&g]() -> SessionState* {
    SessionState* s = g.session;
    return s && detail::g_session.load() == s->epoch ? s : nullptr;
  };
  {
    std::lock_guard lk(g.registry);
    SessionState* s = running();
    if (!s) return 0;
    if (uint32_t id = thread_with_os_tid(*s, tid)) return id;
  }
  // Read and intern the name outside the registry lock: recording threads take it when they bind.
  const std::string comm = task_comm(tid);
  const uint32_t name = comm.empty() ? 0 : intern(comm);
  std::lock_guard lk(g.registry);
  SessionState* s = running();
  if (!s) return 0;
  if (uint32_t id = thread_with_os_tid(*s, tid)) return id;  // it bound (or was added) meanwhile
  const uint32_t id = g.next_thread_id++;
  auto waiting = s->table.waiting_names.find(tid);  // kept: the thread binds with it too
  const uint32_t shown = waiting != s->table.waiting_names.end() ? waiting->second : name;
  s->table.threads[id] = dump::ThreadEntry{id, tid, static_cast<uint32_t>(::getpid()), shown, detail::now(), 0, 0, 0};
  s->table.dirty_threads.insert(id);
  s->table.unbound_threads[tid] = id;
  g.threads_generation.fetch_add(1, std::memory_order_release);
  return id;
}

void name_os_thread(uint32_t tid, std::string_view name) {
  if (tid == 0 || name.empty() || detail::g_session.load() == 0) return;
  const uint32_t id = intern(name);  // outside the registry lock, like every intern on a bind
  Global& g = G();
  std::lock_guard lk(g.registry);
  SessionState* s = g.session;
  if (!s || detail::g_session.load() != s->epoch) return;
  const uint32_t entry = live_thread_with_os_tid(*s, tid);
  if (entry) {
    s->table.threads[entry].name = id;
    s->table.dirty_threads.insert(entry);
  }
  // A thread without a ring yet (no entry, or one a collector made) binds later and must keep this name.
  if (!entry || s->table.unbound_threads.count(tid)) s->table.waiting_names[tid] = id;
  // A thread that never records keeps no entry at all: its counters (sampled by OS thread id) are named by this.
  std::lock_guard meta(s->metadata.mu);
  s->metadata.process_extra.emplace_back("os_thread." + std::to_string(tid) + ".thread_name", std::string(name));
  s->metadata.dirty = true;
}

void forget_os_thread_name(uint32_t tid) {
  Global& g = G();
  std::lock_guard lk(g.registry);
  if (SessionState* s = g.session) s->table.waiting_names.erase(tid);
}

uint64_t session_threads_generation() { return G().threads_generation.load(std::memory_order_acquire); }

void set_thread_exit_hook(ThreadExitHook hook) { g_thread_exit_hook.store(hook, std::memory_order_release); }

ExitGuard::~ExitGuard() {
  t_exiting = true;
  RingEntry* e = entry;
  if (!e) return;
  detail::ThreadState& ts = detail::t_state;
  const bool recording = ts.ring == e && ts.epoch == detail::g_session.load(std::memory_order_relaxed);
  if (ThreadExitHook hook = g_thread_exit_hook.load(std::memory_order_acquire); hook && recording) hook(e->thread_id);
  const uint64_t now = detail::now();
  if (recording) {
    ThreadEndRecord r{{RecordKind::kThreadEnd, 0, sizeof(ThreadEndRecord)}, 0, now};
    if (uint8_t* p = detail::ring_reserve(e, sizeof(r))) {
      std::memcpy(p, &r, sizeof(r));
      detail::ring_commit(e, sizeof(r));
    }
  }
  {
    Global& g = G();
    std::lock_guard lk(g.registry);
    SessionState* s = g.session;
    if (s && s->epoch == e->epoch) {
      auto it = s->table.threads.find(e->thread_id);
      if (it != s->table.threads.end()) {
        it->second.end_ts = now;
        it->second.flags |= dump::kThreadExited;
        s->table.dirty_threads.insert(e->thread_id);
      }
    }
    ts.ring = nullptr;
    ts.epoch = 0;
    e->retired.store(true, std::memory_order_release);
  }
  entry = nullptr;
}

}  // namespace inferscope::runtime

namespace inferscope {

using runtime::G;

void set_thread_name(std::string_view name) noexcept {
  try {
    runtime::t_thread_name.assign(name);
    const uint32_t id = runtime::intern(name);
    const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
    if (e == 0 || runtime::t_exiting) return;
    if (detail::t_state.epoch != e && !detail::bind_thread(e)) return;
    auto* entry = static_cast<runtime::RingEntry*>(detail::t_state.ring);
    ThreadNameRecord r{{RecordKind::kThreadName, 0, sizeof(ThreadNameRecord)}, id, detail::now()};
    detail::emit_record(&r, sizeof(r));
    std::lock_guard lk(G().registry);
    if (G().session && G().session->epoch == e) {
      G().session->table.threads[entry->thread_id].name = id;
      G().session->table.dirty_threads.insert(entry->thread_id);
    }
  } catch (...) {
  }
}

namespace detail {

bool bind_thread(uint32_t epoch) noexcept {
  if (runtime::t_exiting) return false;
  try {
    const runtime::OwnNames own = runtime::names_for_new_thread();
    auto& g = G();
    std::lock_guard lk(g.registry);
    runtime::SessionState* s = g.session;
    if (!s || g_session.load(std::memory_order_relaxed) != epoch || s->epoch != epoch) return false;
    ThreadState& ts = t_state;
    if (ts.ring) static_cast<runtime::RingEntry*>(ts.ring)->retired.store(true, std::memory_order_release);
    runtime::RingEntry* e = runtime::make_ring(uint64_t(s->cfg.thread_buffer_kb) * 1024);
    const uint32_t tid = runtime::os_tid();
    const uint32_t name = runtime::bind_name(*s, tid, own);
    // A collector may have entered this thread already (runtime::thread_for_os_tid): one thread, one entry.
    if (auto u = s->table.unbound_threads.find(tid); u != s->table.unbound_threads.end() && s->table.threads.count(u->second)) {
      e->thread_id = u->second;
      s->table.unbound_threads.erase(u);
      if (name) s->table.threads[e->thread_id].name = name;
    } else {
      if (u != s->table.unbound_threads.end()) s->table.unbound_threads.erase(u);
      e->thread_id = g.next_thread_id++;
      s->table.threads[e->thread_id] =
          dump::ThreadEntry{e->thread_id, tid, static_cast<uint32_t>(::getpid()), name, now(), 0, 0, 0};
    }
    e->epoch = epoch;
    g.rings.push_back(e);
    s->table.dirty_threads.insert(e->thread_id);
    g.threads_generation.fetch_add(1, std::memory_order_release);
    ts.ring = e;
    ts.epoch = epoch;
    runtime::t_exit_guard.entry = e;
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace detail
}  // namespace inferscope
