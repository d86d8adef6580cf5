#include "signals.hpp"

#include <signal.h>

#include <cstddef>
#include <iterator>

namespace iscope_run {
namespace {

volatile sig_atomic_t g_program = 0;

// A signal the terminal generated (Ctrl-C, Ctrl-\, a hang-up: si_code SI_KERNEL) went to the whole foreground
// process group, the program included: passing it on would deliver it twice (a second KeyboardInterrupt inside
// the program's own `finally`). One sent by a process (kill, sigqueue, tgkill) to iscope-run alone is passed on.
void forward(int sig, siginfo_t* info, void*) {
  if (info && info->si_code == SI_KERNEL) return;
  if (g_program > 0) ::kill(static_cast<pid_t>(g_program), sig);
}

sigset_t forwarded_set(const int* signals, size_t n) {
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < n; ++i) sigaddset(&set, signals[i]);
  return set;
}

}  // namespace

SignalForwarding::SignalForwarding() {
  const sigset_t set = forwarded_set(kSignals, std::size(kSignals));
  ::sigprocmask(SIG_BLOCK, &set, &old_mask_);
  struct sigaction fwd{};
  fwd.sa_sigaction = forward;
  fwd.sa_flags = SA_SIGINFO;
  sigemptyset(&fwd.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    ::sigaction(kSignals[i], nullptr, &old_[i]);
    if (old_[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &fwd, nullptr);
  }
}

void SignalForwarding::in_program() {
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

void SignalForwarding::forward_to(pid_t program) {
  g_program = program;
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

void SignalForwarding::program_ended() { g_program = 0; }

}  // namespace iscope_run
