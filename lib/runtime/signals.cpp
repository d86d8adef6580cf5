// Signal handling for a session: SIGINT/SIGTERM write the dump before their default action, SIGUSR2 asks a
// ring or sampled session for a snapshot; every handler chained to what it replaced.
#include "runtime/session_state.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace inferscope::runtime {

std::atomic<int> g_snapshot_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

namespace {

// --- signals ---------------------------------------------------------------------------------------------
//
// SIGINT/SIGTERM handlers only ever replace a default action (SIG_DFL), and remember what they replaced: in any
// process but the one that installed them (a child made by clone() without fork's handlers, or before they ran)
// they act exactly as that previous disposition would. Only the owner rings its own writer's doorbell.
// SIGUSR2 (ring and sampled modes) is chained instead: over a handler the program installed first, ours asks for
// the snapshot and then calls the program's, so both happen; a program that ignores SIGUSR2 keeps ignoring it.

constexpr int kMaxSignal = 65;
struct sigaction g_prev_action[kMaxSignal];
std::atomic<bool> g_ours[kMaxSignal];
std::atomic<bool> g_chained[kMaxSignal];  // ours runs the program's handler after its own work
std::atomic<pid_t> g_handler_owner{0};
std::atomic<bool> g_deferred_python_signals{false};  // SIGTERM/SIGUSR2 wait for Python's start-up (see below)

// --- termination (SIGINT/SIGTERM) ------------------------------------------------------------------------------
//
// Without us the signal ends the process at once. With us the writer thread first writes the dump, then lets the
// signal's default action happen (reraise). Meanwhile the thread the signal interrupted waits in our handler
// instead of running on: a program that went on would print, write files or even finish with exit(0) (whose atexit
// found the session already stopped and ended the process with status 0 while the writer still wrote the report).
enum Phase : int {
  kNone = 0,
  kAsked = 1,      // the handler rang the writer's doorbell with the signal
  kStopping = 2,   // the writer took the session: it is writing the dump
  kFinalised = 3,  // the dump is written; the writer writes the report (if any), then re-raises
};
std::atomic<int> g_termination_signal{0};
std::atomic<int> g_termination_phase{kNone};
std::atomic<pid_t> g_writer_tid{0};    // the writer never waits for itself
std::atomic<pid_t> g_stopping_tid{0};  // nor for the thread that is stopping the session (it holds the control lock)
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free);

// Until the writer has taken the session this long, the handler gives up waiting and lets the thread go on (the
// writer may need a lock the interrupted thread holds: the string table, a collector's); the signal stays asked
// for, and whoever stops the session re-raises it. Once the dump is written nothing of ours is needed any more.
constexpr long kHandlerWaitMs = 10'000;

pid_t own_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Async-signal-safe: atomics, gettid and nanosleep.
void wait_for_termination_in_handler() {
  const pid_t me = own_tid();
  if (me == g_writer_tid.load() || me == g_stopping_tid.load()) return;
  const timespec tick{0, 1'000'000};
  for (long waited_ms = 0;; ++waited_ms) {
    const int phase = g_termination_phase.load();
    if (phase == kNone) return;
    if (phase != kFinalised && waited_ms >= kHandlerWaitMs) return;
    ::nanosleep(&tick, nullptr);
  }
}

// What the signal would have done without us, in this process.
void chain_signal(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = g_prev_action[sig];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler == SIG_DFL) {
    ::sigaction(sig, &prev, nullptr);  // blocked while this handler runs: the default action follows at once
    ::raise(sig);
  } else if (prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
}

// The program's own handler, which ours was installed over (never a default action or SIG_IGN: see
// install_chained_handler).
void call_program_handler(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = g_prev_action[sig];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
}

// SIGINT/SIGTERM in the process that owns the session: the writer is asked to write the dump and end the process by
// the signal, and this thread waits for it (above). With no session recording (stopped already), nothing is left to
// write: the signal's own action at once. A second one while the first is handled waits likewise.
void handle_termination(int sig, siginfo_t* info, void* context, Doorbell& doorbell) {
  if (g_termination_phase.load() == kNone) {
    if (detail::g_session.load(std::memory_order_relaxed) == 0) {
      chain_signal(sig, info, context);
      return;
    }
    g_termination_signal.store(sig);
    g_termination_phase.store(kAsked);
    doorbell.ring(sig == SIGINT ? Doorbell::kSigInt : Doorbell::kSigTerm);
  }
  wait_for_termination_in_handler();
}

void handle_signal(int sig, siginfo_t* info, void* context) {
  // Async-signal-safe: a flag and this process's own writer's doorbell (the writer writes the dump, and for
  // SIGINT/SIGTERM re-raises); no lock, no allocation.
  const int saved_errno = errno;
  Global& g = G();
  if (::getpid() == g_handler_owner.load(std::memory_order_relaxed) &&
      g.owner_pid.load(std::memory_order_relaxed) == ::getpid()) {
    if (sig == SIGINT || sig == SIGTERM) {
      handle_termination(sig, info, context, g.doorbell);
    } else if (sig == SIGUSR2) {
      g_snapshot_signal.store(1, std::memory_order_release);
      g.doorbell.ring(Doorbell::kSnapshot);
    }
    if (g_chained[sig].load(std::memory_order_relaxed)) call_program_handler(sig, info, context);
  } else {
    chain_signal(sig, info, context);
  }
  errno = saved_errno;
}

bool handler_is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == handle_signal;
}

void install_handler(int sig) {
  struct sigaction old{};
  if (::sigaction(sig, nullptr, &old) != 0) return;
  if (handler_is_ours(old)) {
    g_handler_owner.store(::getpid());
    return;
  }
  // Only take over the default action: a program that handles or ignores the signal keeps doing so, and
  // its own exit path (atexit) writes the dump.
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
  g_prev_action[sig] = old;
  struct sigaction sa{};
  sa.sa_sigaction = handle_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  g_handler_owner.store(::getpid());
  g_ours[sig].store(true);
  ::sigaction(sig, &sa, nullptr);
}

// SIGUSR2: ours also over a handler the program installed first (then chained to it), not over SIG_IGN.
void install_chained_handler(int sig) {
  struct sigaction old{};
  if (::sigaction(sig, nullptr, &old) != 0) return;
  if (handler_is_ours(old)) {
    g_handler_owner.store(::getpid());
    return;
  }
  const bool is_default = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) return;
  g_prev_action[sig] = old;
  struct sigaction sa{};
  sa.sa_sigaction = handle_signal;
  sa.sa_mask = old.sa_mask;  // the program's handler runs with the signals it asked to block
  sa.sa_flags = SA_RESTART | SA_SIGINFO | (old.sa_flags & SA_ONSTACK);
  g_handler_owner.store(::getpid());
  g_chained[sig].store(!is_default);
  g_ours[sig].store(true);
  ::sigaction(sig, &sa, nullptr);
}

}  // namespace

// A forked child: what was ours goes back to what it replaced (the child's own session, if it has one,
// installs them again for itself). A handler the program installed since is left alone.
void restore_handlers_in_child() {
  for (int sig = 1; sig < kMaxSignal; ++sig) {
    if (!g_ours[sig].load()) continue;
    g_ours[sig].store(false);
    g_chained[sig].store(false);
    struct sigaction cur{};
    if (::sigaction(sig, nullptr, &cur) == 0 && handler_is_ours(cur)) ::sigaction(sig, &g_prev_action[sig], nullptr);
  }
  g_handler_owner.store(0);
  g_deferred_python_signals.store(false);
  g_snapshot_signal.store(0);
  g_termination_signal.store(0);  // the parent's, if it was being ended
  g_termination_phase.store(kNone);
  g_writer_tid.store(0);
  g_stopping_tid.store(0);
}

void set_writer_thread(bool running) { g_writer_tid.store(running ? own_tid() : 0); }

void set_stopping_thread(bool stopping) { g_stopping_tid.store(stopping ? own_tid() : 0); }

void termination_stopping() {
  if (g_termination_phase.load() != kNone) g_termination_phase.store(kStopping);
}

void termination_finalised() {
  if (g_termination_phase.load() != kNone) g_termination_phase.store(kFinalised);
}

int termination_to_raise(bool from_writer) {
  const int phase = g_termination_phase.load();
  if (phase == kNone) return 0;
  if (!from_writer && (phase == kStopping || phase == kFinalised)) {
    // The writer is ending the process by the signal once the dump and the report are written: this thread (at
    // exit, or in stop()) must not end it first, with its own status.
    const timespec tick{0, 1'000'000};
    while (g_termination_phase.load() != kNone) ::nanosleep(&tick, nullptr);
    return 0;
  }
  return g_termination_signal.load();
}

// Ends this process by `sig` as it would have ended without us (the dump is written).
void reraise(int sig) {
  if (sig <= 0 || sig >= kMaxSignal) return;
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, g_ours[sig].load() ? &g_prev_action[sig] : &dfl, nullptr);
  // The writer thread keeps the program's signals blocked (writer_signals_blocked): raise() aims at this thread.
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
}

void block_program_signals_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

// A Python interpreter lives in this process (the executable or libpython exports the C API).
int (*python_is_initialized())() {
  return reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
}

}  // namespace

void install_session_handlers(const SessionState& s) {
  auto py_initialized = python_is_initialized();
  // Python reads every signal's disposition once, when it starts, and shows a handler it did not install as
  // None (signal.getsignal; a saved None cannot be restored). Installed before that (LD_PRELOAD), ours would
  // change what the program sees, so they wait until inferscope_py is imported (install_deferred_...).
  const bool wait_for_python = py_initialized && !py_initialized();
  if (s.from_env && s.cfg.handle_signals) {
    // SIGINT stays Python's own: KeyboardInterrupt runs the program's except/finally and atexit, which
    // writes the dump.
    if (!py_initialized) install_handler(SIGINT);
    if (!wait_for_python) install_handler(SIGTERM);
  }
  if (s.ring_mode && !wait_for_python) {
    install_chained_handler(SIGUSR2);
    crash::install_handlers();
  }
  g_deferred_python_signals.store(wait_for_python);
}

void install_deferred_signal_handlers() {
  Global& g = G();
  std::lock_guard ctl(g.control);
  SessionState* s = g.session;
  if (!g_deferred_python_signals.exchange(false) || !s || detail::g_session.load() != s->epoch) return;
  if (g.owner_pid.load() != ::getpid()) return;
  if (s->from_env && s->cfg.handle_signals) install_handler(SIGTERM);
  if (s->ring_mode) {
    install_chained_handler(SIGUSR2);
    crash::install_handlers();
  }
}

}  // namespace inferscope::runtime
