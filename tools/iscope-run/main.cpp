// iscope-run: records an unmodified program.
//
//   iscope-run [-o DUMP] [options] -- PROGRAM [ARGS...]
//
// It forks, sets up the child's environment (the contract with lib/runtime/autostart.cpp: INFERSCOPE_ENABLE,
// INFERSCOPE_OUTPUT, INFERSCOPE_ROOT_PID, INFERSCOPE_FOLLOW_CHILDREN, LD_PRELOAD, CUDA_INJECTION64_PATH,
// NVTX_INJECTION64_PATH, PYTHONPATH), execs the program, waits, and exits with the program's status (128+N
// when a signal N killed it). The program's stdin, stdout and stderr are its own; iscope-run writes to
// stderr only its own errors and one closing line naming the dump (unless -q): "dump written to" only when
// this run wrote it (a dump from an earlier run at the same path is told apart by its inode: the runtime
// replaces one only by renaming a new file over it).
#include "dump/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

const char* kUsage =
    "usage: iscope-run [-o DUMP] [options] -- PROGRAM [ARGS...]\n"
    "Records PROGRAM (CPU ranges, Python, CUDA activity) into DUMP without changing it.\n"
    "\n"
    "  -o, --output DUMP          dump file (default: ./<program>.<pid>.iscope)\n"
    "      --follow-children      also record child processes (fork, multiprocessing, spawned and exec'd\n"
    "                             programs); each writes <stem>.<pid>.iscope next to DUMP\n"
    "      --buffer-mode MODE     stream (default: written as it fills) or ring (flight recorder)\n"
    "      --trace-size-mb N      ring-mode memory budget\n"
    "      --no-cupti             no GPU collection\n"
    "      --cupti-activities S   default | minimal | full | none | comma list of kernel, memcpy, memset,\n"
    "                             sync, memory, graph, overhead, api, runtime, driver, api_activity\n"
    "      --no-python            no Python tracing\n"
    "      --nvtx-emit            also emit ISCOPE ranges as NVTX ranges\n"
    "      --report FILE          write a report at exit (.md, .html or .json)\n"
    "      --set KEY=VALUE        any other setting (sets INFERSCOPE_<KEY>)\n"
    "      --library PATH         libinferscope.so to inject (default: beside this tool; env INFERSCOPE_LIBRARY)\n"
    "  -q, --quiet                no closing line on stderr\n"
    "  -h, --help                 this help\n"
    "\n"
    "Exit status: the program's own, 128+N when signal N ended it, 127 when it could not be started,\n"
    "2 for bad usage.\n";

std::string exe_dir() {
  char buf[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool exists(const std::string& p) {
  struct stat st;
  return !p.empty() && ::stat(p.c_str(), &st) == 0;
}

std::string absolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  char cwd[PATH_MAX] = {};
  if (!::getcwd(cwd, sizeof(cwd))) return p;
  return std::string(cwd) + "/" + p;
}

std::string find_library() {
  if (const char* e = std::getenv("INFERSCOPE_LIBRARY"); e && *e) return absolute(e);
  const std::string dir = exe_dir();
  for (std::string c : {dir + "/../" INFERSCOPE_INSTALL_LIBDIR "/libinferscope.so", dir + "/../lib/libinferscope.so",
                        std::string(INFERSCOPE_BUILD_LIBRARY)})
    if (exists(c)) return c;
  return {};
}

std::string find_python_dir() {
  if (const char* e = std::getenv("INFERSCOPE_PYTHON_DIR"); e && *e) return exists(e) ? absolute(e) : std::string();
  const std::string dir = exe_dir();
  for (std::string c : {dir + "/../" INFERSCOPE_INSTALL_LIBDIR "/inferscope/python", dir + "/../lib/inferscope/python",
                        std::string(INFERSCOPE_BUILD_PYTHON_DIR)})
    if (exists(c)) return c;
  return {};
}

void prepend(const char* var, const std::string& value, char sep) {
  const char* old = std::getenv(var);
  std::string v = value;
  if (old && *old) v += std::string(1, sep) + old;
  ::setenv(var, v.c_str(), 1);
}

std::string env_key(std::string key) {
  for (auto& c : key) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "INFERSCOPE_" + key;
}

// The identity of the file at `path` (0, 0 when there is none).
std::pair<dev_t, ino_t> file_id(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

// Refuses, before the program runs, an output that can never be written: a symlink or special file there,
// or another live session writing it. Exit status 2 (usage), nothing started.
bool output_usable(const std::string& output) {
  if (auto why = inferscope::dump::unusable_output(output)) {
    std::fprintf(stderr, "iscope-run: %s\n", why->c_str());
    return false;
  }
  if (pid_t holder = inferscope::dump::output_lock_holder(output)) {
    std::string who = holder > 0 ? " (pid " + std::to_string(holder) + ")" : std::string();
    std::fprintf(stderr, "iscope-run: %s is being written by another session%s; choose another -o\n",
                 output.c_str(), who.c_str());
    return false;
  }
  return true;
}

// The closing line: "dump written" only when this run put a new file at `dump` (it was not there before, or
// another file is there now).
void report_dump(const std::string& dump, std::pair<dev_t, ino_t> before) {
  const auto after = file_id(dump);
  if (after.second != 0 && after != before)
    std::fprintf(stderr, "iscope-run: dump written to %s\n", dump.c_str());
  else if (after.second != 0)
    std::fprintf(stderr, "iscope-run: no dump written by this run; %s is from an earlier run\n", dump.c_str());
  else
    std::fprintf(stderr, "iscope-run: no dump at %s\n", dump.c_str());
}

pid_t g_child = 0;
void forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

}  // namespace

int main(int argc, char** argv) {
  std::string output, library_override;
  bool follow = false, quiet = false;
  std::vector<std::pair<std::string, std::string>> settings;  // INFERSCOPE_* for the child
  int i = 1;
  auto value = [&](const std::string& opt) -> std::string {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "iscope-run: %s needs a value\n%s", opt.c_str(), kUsage);
      std::exit(2);
    }
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    std::string inline_value;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos && a.rfind("--set", 0) != 0) {
      inline_value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));  // --opt=value
    }
    auto val = [&](const std::string& opt) { return inline_value.empty() ? value(opt) : inline_value; };
    if (a == "--") {
      ++i;
      break;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-o" || a == "--output") {
      output = val(a);
    } else if (a == "--follow-children") {
      follow = true;
    } else if (a == "--buffer-mode") {
      settings.emplace_back("INFERSCOPE_BUFFER_MODE", val(a));
    } else if (a == "--trace-size-mb") {
      settings.emplace_back("INFERSCOPE_TRACE_SIZE_MB", val(a));
    } else if (a == "--no-cupti") {
      settings.emplace_back("INFERSCOPE_CUPTI", "0");
    } else if (a == "--cupti-activities") {
      settings.emplace_back("INFERSCOPE_CUPTI_ACTIVITIES", val(a));
    } else if (a == "--no-python") {
      settings.emplace_back("INFERSCOPE_PYTHON", "0");
    } else if (a == "--nvtx-emit") {
      settings.emplace_back("INFERSCOPE_NVTX_EMIT", "1");
    } else if (a == "--report") {
      settings.emplace_back("INFERSCOPE_REPORT", absolute(val(a)));
    } else if (a == "--set") {
      std::string kv = value(a);
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "iscope-run: --set expects KEY=VALUE, got '%s'\n", kv.c_str());
        return 2;
      }
      settings.emplace_back(env_key(kv.substr(0, eq)), kv.substr(eq + 1));
    } else if (a == "--library") {
      library_override = val(a);
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "iscope-run: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    } else {
      break;  // the program (no "--" given)
    }
  }
  if (i >= argc) {
    std::fprintf(stderr, "iscope-run: no program given\n%s", kUsage);
    return 2;
  }
  const std::string library = library_override.empty() ? find_library() : absolute(library_override);
  if (library.empty() || !exists(library)) {
    std::fprintf(stderr, "iscope-run: cannot find libinferscope.so%s%s; set INFERSCOPE_LIBRARY\n",
                 library.empty() ? "" : " at ", library.c_str());
    return 127;
  }
  const std::string python_dir = find_python_dir();

  // SIGINT/SIGQUIT from the terminal reach the whole process group, the program included: iscope-run waits
  // for the program to write its dump instead of dying first (as system() does). Other termination
  // signals sent to iscope-run alone are passed on.
  struct sigaction ign{}, fwd{}, old_int{}, old_quit{};
  ign.sa_handler = SIG_IGN;
  fwd.sa_handler = forward;
  sigemptyset(&fwd.sa_mask);
  ::sigaction(SIGINT, &ign, &old_int);
  ::sigaction(SIGQUIT, &ign, &old_quit);

  if (!output.empty() && !output_usable(absolute(output))) return 2;
  std::string program = argv[i];
  std::string base = program.substr(program.rfind('/') + 1);
  // The child waits until the parent has seen what was at its output before it ran (its default output is
  // named after its pid, known only after fork).
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "iscope-run: pipe failed: %s\n", std::strerror(errno));
    return 127;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    std::fprintf(stderr, "iscope-run: fork failed: %s\n", std::strerror(errno));
    return 127;
  }
  if (pid == 0) {
    char byte = 0;
    ::close(go[1]);
    while (::read(go[0], &byte, 1) < 0 && errno == EINTR) {
    }
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    const std::string me = std::to_string(::getpid());
    std::string out = output.empty() ? base + "." + me + ".iscope" : output;
    ::setenv("INFERSCOPE_ENABLE", "1", 1);
    ::setenv("INFERSCOPE_OUTPUT", absolute(out).c_str(), 1);
    ::setenv("INFERSCOPE_ROOT_PID", me.c_str(), 1);
    ::setenv("INFERSCOPE_FOLLOW_CHILDREN", follow ? "1" : "0", 1);
    for (auto& [k, v] : settings) ::setenv(k.c_str(), v.c_str(), 1);
    prepend("LD_PRELOAD", library, ':');
    ::setenv("CUDA_INJECTION64_PATH", library.c_str(), 1);
    ::setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
    if (!python_dir.empty()) prepend("PYTHONPATH", python_dir, ':');
    ::execvp(argv[i], argv + i);
    std::fprintf(stderr, "iscope-run: cannot run %s: %s\n", argv[i], std::strerror(errno));
    ::_exit(127);
  }
  g_child = pid;
  const std::string dump = absolute(output.empty() ? base + "." + std::to_string(pid) + ".iscope" : output);
  const auto before = file_id(dump);
  ::close(go[0]);
  ::close(go[1]);  // the child goes on
  for (int sig : {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(sig, &fwd, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "iscope-run: waitpid failed: %s\n", std::strerror(errno));
      return 127;
    }
  }
  if (!quiet && !(WIFEXITED(status) && WEXITSTATUS(status) == 127 && !exists(dump))) report_dump(dump, before);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}
