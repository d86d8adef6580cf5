// exec() keeps what was recorded before it. The exec family is interposed here (libinferscope is first in
// LD_PRELOAD under iscope-run, and before libc for a program linked with it): a process that owns a running
// session completes its dump, then execs. The new image, if it records too (same pid, same output path),
// moves that dump aside to <stem>.pre-exec<N>.iscope before it opens its own (autostart.cpp), told by
// INFERSCOPE_EXEC_FROM=<pid> in the environment it was given.
//
// Why interposition and not an exit hook: exec runs no atexit handler and no destructor; the old image's
// memory (rings not yet drained) is gone the moment execve succeeds, so the dump must be finished before the
// call. A vfork child (posix_spawn, system(), Python's subprocess) shares its parent's memory and owns no
// session: it passes straight through, touching nothing (finish_session_of_this_process checks the pid).
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

const char kExecFrom[] = "INFERSCOPE_EXEC_FROM=";

// `envp` with INFERSCOPE_EXEC_FROM=<pid> (replacing any); `store` keeps the strings alive.
std::vector<char*> env_with_exec_from(char* const envp[], std::string& store) {
  store = kExecFrom + std::to_string(::getpid());
  std::vector<char*> out;
  for (char* const* e = envp; e && *e; ++e)
    if (std::strncmp(*e, kExecFrom, sizeof(kExecFrom) - 1) != 0) out.push_back(*e);
  out.push_back(store.data());
  out.push_back(nullptr);
  return out;
}

// Finishes this process's dump before an exec; true when there was one (the new image is then told).
bool finish_before_exec() {
  const int saved = errno;
  const bool had = !finish_session_of_this_process().empty();
  errno = saved;
  return had;
}

// For the variants that pass `environ`: the marker goes into this process's environment, and out again when
// the exec fails.
template <class Call>
int exec_with_environ(Call call) {
  if (!finish_before_exec()) return call();
  ::setenv("INFERSCOPE_EXEC_FROM", std::to_string(::getpid()).c_str(), 1);
  const int r = call();
  const int saved = errno;
  ::unsetenv("INFERSCOPE_EXEC_FROM");
  log(LogLevel::kWarn, "exec failed; this process is no longer recorded (its dump was completed before the exec)");
  errno = saved;
  return r;
}

template <class Call>
int exec_with_envp(char* const envp[], Call call) {
  if (!finish_before_exec()) return call(envp);
  std::string store;
  std::vector<char*> env = env_with_exec_from(envp, store);
  const int r = call(env.data());
  const int saved = errno;
  log(LogLevel::kWarn, "exec failed; this process is no longer recorded (its dump was completed before the exec)");
  errno = saved;
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
