// fork(): the runtime's locks across it, and a clean runtime in the child.
#include "runtime/session_state.hpp"

#include "dump/path.hpp"

#include <pthread.h>
#include <unistd.h>

#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::runtime {
namespace {

// --- fork --------------------------------------------------------------------------------------------------
//
// A child gets a clean runtime: every runtime lock free (the ones with data behind them are held across
// fork(), so the child's copy is whole), no writer thread, no inherited wake-up, signal handlers back to what
// they replaced, and either a session of its own (follow_children) or none: g_session is 0, so its hot path
// costs one load. The parent's session goes on untouched.



void before_fork() {
  Global& g = G();
  g.registry.lock();  // before the string table: open_channel() interns while holding the registry
  strings_lock_for_fork();
  g.factories_mu.lock();
  device_locations_mutex().lock();
}

void after_fork_in_parent() {
  Global& g = G();
  device_locations_mutex().unlock();
  g.factories_mu.unlock();
  strings_unlock_after_fork(false);
  g.registry.unlock();
}

// The parent's session as this child found it: abandoned (its writer, collectors and rings stay in the parent).
struct Inherited {
  bool follow = false;
  bool from_env = false;
  Config cfg;
  std::string family_output;
};

Inherited abandon_parent_session(Global& g) {
  Inherited in;
  SessionState* s = g.session;
  if (s && detail::g_session.load() == s->epoch) {
    in = Inherited{s->cfg.follow_children, s->from_env, s->cfg, s->family_output};
  }
  detail::g_session.store(0, std::memory_order_seq_cst);
  detail::g_nvtx_emit.store(false, std::memory_order_relaxed);
  detail::g_step_name.store(~0u, std::memory_order_relaxed);  // the parent's sampler is the parent's
  if (s) s->file.abandon();  // the parent's dump (and its lock) are the parent's alone
  // Kept, never freed: its threads and locks do not exist here, so nothing may run its destructors. Held from a
  // static so the memory stays reachable (a leak checker in the child reports nothing).
  static auto* abandoned = new std::pair<std::vector<SessionState*>, std::vector<RingEntry*>>();
  if (s) abandoned->first.push_back(s);
  abandoned->second.insert(abandoned->second.end(), g.rings.begin(), g.rings.end());
  g.session = nullptr;
  g.rings.clear();
  return in;
}

void after_fork_in_child() {
  Global& g = G();
  // The thread that held these in the parent does not exist here (placement new: a held lock's owner id
  // would be meaningless).
  new (&g.control) std::mutex;
  new (&g.registry) std::mutex;
  new (&g.factories_mu) std::mutex;
  new (&device_locations_mutex()) std::mutex;
  strings_unlock_after_fork(true);
  Inherited in = abandon_parent_session(g);
  g.doorbell.clear();
  g.owner_pid.store(::getpid());
  restore_handlers_in_child();
  crash::restore_in_child();
  if (!in.follow) return;
  Config cfg = in.cfg;
  const std::string pid = std::to_string(::getpid());
  cfg.output = dump::insert_suffix(in.family_output, pid);
  if (!cfg.report.empty()) cfg.report = dump::insert_suffix(cfg.report, pid);
  // CUDA (and NVML) cannot be used in a child forked from a process that initialised them: the child records
  // its CPU side. (A multiprocessing "spawn" child is a fresh process and records everything.)
  cfg.cupti = false;
  cfg.nvml = false;
  start_session(cfg, in.from_env, in.family_output, /*fork_child=*/true);
}

}  // namespace

void register_fork_handlers(Global& g) {
  if (g.atfork_registered) return;
  g.atfork_registered = true;
  ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

}  // namespace inferscope::runtime
