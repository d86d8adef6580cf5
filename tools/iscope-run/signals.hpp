// iscope-run's signals while the program runs (docs/reliability.md, "Signals"): a termination signal sent to
// iscope-run reaches the program once, so the program stops as it would without iscope-run and its dump is
// written, and iscope-run waits for it instead of dying first.
//
//   iscope_run::SignalForwarding fwd;   // before fork: forwarders installed, the signals held back
//   pid_t pid = fork();
//   if (pid == 0) { fwd.in_program(); exec...; }
//   fwd.forward_to(pid);                // the held-back ones, then every later one, go to the program
//   waitpid(...);
//   fwd.program_ended();
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace iscope_run {

class SignalForwarding {
 public:
  /// SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM and SIGPROF get a handler that
  /// passes them on to the program, and are blocked until forward_to(). One iscope-run was started with ignored
  /// stays ignored (the program inherits that too).
  SignalForwarding();
  /// In the forked child, before exec: the dispositions and mask iscope-run was started with.
  void in_program();
  /// In iscope-run after fork: signals go to `program` from now on (those that came meanwhile too).
  void forward_to(pid_t program);
  /// The program was reaped: nothing more is passed on (its pid may be reused).
  void program_ended();

 private:
  // Every signal whose default action ends a process and that another process may send (a supervisor, a job
  // scheduler, `timeout -s ALRM`). SIGALRM, SIGVTALRM and SIGPROF ended iscope-run alone: the program ran on
  // unwatched, held its output (a second run on it was refused), and its status was lost.
  static constexpr int kSignals[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF};
  struct sigaction old_[sizeof(kSignals) / sizeof(kSignals[0])]{};
  sigset_t old_mask_{};
};

}  // namespace iscope_run
