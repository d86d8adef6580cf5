// A recording that execs hands itself to the program it becomes. The exec family is interposed here (libinferscope
// is first in LD_PRELOAD under iscope-run, and before libc for a program linked with it): a process that owns a
// running session completes its dump, then execs, telling the new image (same pid, same output path) through its
// environment (session.hpp, ExecHandover): INFERSCOPE_EXEC_FROM=<pid>; INFERSCOPE_EXEC_EMPTY=1 when the dump holds
// nothing of the program, which the new image then replaces (an exec chain through shims, env -> bash -> pyenv ->
// python, leaves one dump), else moves aside to <stem>.pre-exec<N>.iscope (autostart.cpp); and the live page's
// listening socket and token, so the one URL printed goes on working (live.cpp).
//
// Why interposition and not an exit hook: exec runs no atexit handler and no destructor; the old image's
// memory (rings not yet drained) is gone the moment execve succeeds, so the dump must be finished before the
// call. A vfork child (posix_spawn, system(), Python's subprocess) shares its parent's memory and owns no
// session: it passes straight through, touching nothing (stop_for_exec checks the pid).
// Recording stops before an exec that then fails; the program goes on unrecorded (docs/reliability.md).
#include "runtime/session.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace inferscope::runtime {
namespace {

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);

struct RealExec {
  ExecveFn execve = nullptr;
  ExecvFn execv = nullptr;
  ExecvFn execvp = nullptr;
  ExecveFn execvpe = nullptr;
  FexecveFn fexecve = nullptr;
};

RealExec g_real;

void resolve_real_exec() {
  RealExec& r = g_real;
  r.execve = reinterpret_cast<ExecveFn>(::dlsym(RTLD_NEXT, "execve"));
  r.execv = reinterpret_cast<ExecvFn>(::dlsym(RTLD_NEXT, "execv"));
  r.execvp = reinterpret_cast<ExecvFn>(::dlsym(RTLD_NEXT, "execvp"));
  r.execvpe = reinterpret_cast<ExecveFn>(::dlsym(RTLD_NEXT, "execvpe"));
  r.fexecve = reinterpret_cast<FexecveFn>(::dlsym(RTLD_NEXT, "fexecve"));
}

// Resolved when the library loads, not at exec time (a vfork child must not take the loader's locks); an
// exec from a constructor that ran before ours resolves them then.
__attribute__((constructor)) void resolve_real_exec_at_load() { resolve_real_exec(); }

RealExec& real() {
  if (!g_real.execve) resolve_real_exec();
  return g_real;
}

// The names of the variables a handover sets ("INFERSCOPE_EXEC_FROM" of "INFERSCOPE_EXEC_FROM=4242").
std::string name_of(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

bool is_handover_variable(const char* entry, const std::vector<std::string>& handover) {
  for (const std::string& v : handover) {
    const std::string name = name_of(v) + "=";
    if (std::strncmp(entry, name.c_str(), name.size()) == 0) return true;
  }
  return false;
}

// `envp` with the handover's variables (replacing any of the same names); the strings stay in `handover`.
std::vector<char*> env_with(char* const envp[], std::vector<std::string>& handover) {
  std::vector<char*> out;
  for (char* const* e = envp; e && *e; ++e)
    if (!is_handover_variable(*e, handover)) out.push_back(*e);
  for (std::string& v : handover) out.push_back(v.data());
  out.push_back(nullptr);
  return out;
}

// Stops this process's session before an exec (completing its dump, keeping its live page's socket open for the new
// image); errno as it was. Nothing when the process records nothing of its own.
ExecHandover stop_before_exec() {
  const int saved = errno;
  ExecHandover h = stop_for_exec();
  errno = saved;
  return h;
}

// The exec failed: this process goes on, unrecorded; the page's socket is no longer anyone's.
void after_failed_exec(const ExecHandover& h) {
  const int saved = errno;
  if (h.live_fd >= 0) ::close(h.live_fd);
  log(LogLevel::kWarn, "exec failed; this process is no longer recorded (its dump was completed before the exec)");
  errno = saved;
}

// For the variants that pass `environ`: the handover goes into this process's environment, and out again when the
// exec fails.
template <class Call>
int exec_with_environ(Call call) {
  const ExecHandover h = stop_before_exec();
  if (!h.had_session) return call();
  for (const std::string& v : h.environment) ::setenv(name_of(v).c_str(), v.substr(v.find('=') + 1).c_str(), 1);
  const int r = call();
  for (const std::string& v : h.environment) ::unsetenv(name_of(v).c_str());
  after_failed_exec(h);
  return r;
}

template <class Call>
int exec_with_envp(char* const envp[], Call call) {
  ExecHandover h = stop_before_exec();
  if (!h.had_session) return call(envp);
  std::vector<char*> env = env_with(envp, h.environment);
  const int r = call(env.data());
  after_failed_exec(h);
  return r;
}

int missing() {
  errno = ENOSYS;
  return -1;
}

// execl/execlp/execle count their variadic arguments first, then copy them into an array on the stack (no
// allocation: these may run in a vfork child).
size_t count_args(const char* arg0, va_list ap) {
  size_t n = 1;
  if (!arg0) return n;
  while (va_arg(ap, char*) != nullptr) ++n;
  return n + 1;
}

void fill_args(char** argv, size_t n, const char* arg0, va_list ap, char* const** envp) {
  argv[0] = const_cast<char*>(arg0);
  for (size_t i = 1; i < n; ++i) argv[i] = va_arg(ap, char*);
  if (n > 1 || !arg0) argv[n - 1] = nullptr;
  if (envp) *envp = va_arg(ap, char* const*);
}

}  // namespace
}  // namespace inferscope::runtime

using inferscope::runtime::exec_with_envp;
using inferscope::runtime::exec_with_environ;
using inferscope::runtime::real;

extern "C" {

INFERSCOPE_API int execve(const char* path, char* const argv[], char* const envp[]) {
  if (!real().execve) return inferscope::runtime::missing();
  return exec_with_envp(envp, [&](char* const* env) { return real().execve(path, argv, env); });
}

INFERSCOPE_API int execvpe(const char* file, char* const argv[], char* const envp[]) {
  if (!real().execvpe) return inferscope::runtime::missing();
  return exec_with_envp(envp, [&](char* const* env) { return real().execvpe(file, argv, env); });
}

INFERSCOPE_API int fexecve(int fd, char* const argv[], char* const envp[]) {
  if (!real().fexecve) return inferscope::runtime::missing();
  return exec_with_envp(envp, [&](char* const* env) { return real().fexecve(fd, argv, env); });
}

INFERSCOPE_API int execv(const char* path, char* const argv[]) {
  if (!real().execv) return inferscope::runtime::missing();
  return exec_with_environ([&] { return real().execv(path, argv); });
}

INFERSCOPE_API int execvp(const char* file, char* const argv[]) {
  if (!real().execvp) return inferscope::runtime::missing();
  return exec_with_environ([&] { return real().execvp(file, argv); });
}

#define ISCOPE_COLLECT_ARGS(argv, arg0, envp)                          \
  va_list ap;                                                           \
  va_start(ap, arg0);                                                   \
  va_list count_ap;                                                     \
  va_copy(count_ap, ap);                                                \
  const size_t n = inferscope::runtime::count_args(arg0, count_ap);     \
  va_end(count_ap);                                                     \
  char** argv = static_cast<char**>(__builtin_alloca(n * sizeof(char*))); \
  inferscope::runtime::fill_args(argv, n, arg0, ap, envp);              \
  va_end(ap)

INFERSCOPE_API int execl(const char* path, const char* arg0, ...) {
  ISCOPE_COLLECT_ARGS(argv, arg0, nullptr);
  return execv(path, argv);
}

INFERSCOPE_API int execlp(const char* file, const char* arg0, ...) {
  ISCOPE_COLLECT_ARGS(argv, arg0, nullptr);
  return execvp(file, argv);
}

INFERSCOPE_API int execle(const char* path, const char* arg0, ...) {
  char* const* envp = nullptr;
  ISCOPE_COLLECT_ARGS(argv, arg0, &envp);
  return execve(path, argv, envp);
}

}  // extern "C"
