// iscope-run: records an unmodified program.
//
//   iscope-run [-o DUMP] [options] -- PROGRAM [ARGS...]
//
// It checks its options first (a bad one stops it before anything runs), forks, sets up the child's
// environment (the contract with lib/runtime/autostart.cpp: INFERSCOPE_ENABLE, INFERSCOPE_OUTPUT,
// INFERSCOPE_ROOT_PID, INFERSCOPE_FOLLOW_CHILDREN, LD_PRELOAD, CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH,
// PYTHONPATH), execs the program, waits, and exits with the program's status (128+N when a signal N killed
// it, said on stderr), or 125 when the program ran but this run wrote no whole dump. The program's stdin, stdout and stderr are its
// own; iscope-run writes to stderr only its own errors and one closing line naming the dump (unless -q).
// docs/cli.md lists the exit statuses of every tool.
#include "library.hpp"
#include "outcome.hpp"
#include "paths.hpp"
#include "signals.hpp"
#include "try_knobs.hpp"
#include "try_measure.hpp"
#include "try_run.hpp"

#include "config/settings.hpp"
#include "dump/files.hpp"
#include "live/server.hpp"

#include <inferscope/version.hpp>

#define CXXOPTS_VECTOR_DELIMITER '\0'  // a --set value may itself be a comma list (python_include=a,b)
#include <cxxopts.hpp>
#include "tool_common.hpp"  // after the delimiter above: it includes cxxopts too

#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

namespace cfg = inferscope::config;
using inferscope::tools::boolean_flag;

using iscope_run::absolute;
using iscope_run::kCannotStart;
constexpr int kUsage = 2;  // bad usage or a setting that would record nothing: the program did not run

const char* kExitStatus =
    "Exit status: the program's own, 128+N when signal N ended it; 2 for bad usage (nothing was run); 125 when\n"
    "the program ran but no whole dump was written (none, or one without its END chunk); 127 when the program or\n"
    "libinferscope.so could not be found.\n";

// The options that take a value, by every name they have: where iscope-run's options end and the program's
// arguments begin (the first argument that is neither an option nor an option's value) depends on them.
constexpr std::string_view kValueOptions[] = {"o",      "output",      "buffer-mode", "trace-size-mb",
                                              "cupti-activities", "report", "set", "library", "live",
                                              "try", "try-rounds"};

bool takes_value(std::string_view name) {
  return std::find(std::begin(kValueOptions), std::end(kValueOptions), name) != std::end(kValueOptions);
}

// Splits argv into iscope-run's options, argv[1, options_end), and the program, argv[program, argc): after
// "--", else from the first argument that is not an option or an option's value (so `iscope-run python -c x`
// hands -c to python, as before cxxopts parsed these options).
struct Split {
  int options_end;
  int program;
};
Split split_arguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") return {i, i + 1};
    if (a.size() < 2 || a[0] != '-') return {i, i};
    if (a.starts_with("--")) {
      if (a.find('=') == std::string_view::npos && takes_value(a.substr(2))) ++i;
      continue;
    }
    for (size_t k = 1; k < a.size(); ++k)  // -qo DUMP, -oDUMP
      if (takes_value(a.substr(k, 1))) {
        if (k + 1 == a.size()) ++i;
        break;
      }
  }
  return {argc, argc};
}

std::string env_key(std::string key) {
  for (auto& c : key) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "INFERSCOPE_" + key;
}

std::string directory_of(const std::string& absolute_path) {
  const auto slash = absolute_path.rfind('/');
  return slash == 0 ? "/" : absolute_path.substr(0, slash);
}

// Why `path` cannot be written as a file by this user, or "" when it can: an option taken for a file name, an
// existing directory, a missing or unwritable directory, an unwritable file. The runtime would otherwise find
// out in the program, after it ran, and say so once per process.
std::string unwritable(const std::string& path) {
  // `-o --quiet prog` gives -o the file "--quiet" (the dump was written there): refused; a file really named so
  // is reachable as ./--quiet.
  if (path.size() > 1 && path[0] == '-')
    return "is an option, not a file name: give the file name after the flag (a file named so: ./" + path + ")";
  const std::string abs = absolute(path);
  // Through a link the end of the chain is written: a loop is refused now, not when the program ends (a --report
  // into a loop was refused only after the run, which still exited 0).
  if (const auto target = inferscope::dump::resolve_output(abs); !target.error.empty()) return "is a symbolic link loop";
  // /proc/self/mem is a "regular file" that stat() passes.
  if (const auto why = inferscope::dump::on_kernel_filesystem(abs)) return *why;
  struct stat st{};
  if (::stat(abs.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "is a directory; name a file";
    if (::access(abs.c_str(), W_OK) != 0) return std::string("cannot be written: ") + std::strerror(errno);
    return "";
  }
  const std::string dir = directory_of(abs);
  if (::stat(dir.c_str(), &st) != 0) return "its directory " + dir + " does not exist";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "its directory " + dir + " cannot be written: " + std::strerror(errno);
  return "";
}

// What stops --report FILE from being written when the program ends: what stops any output, and a FIFO nobody
// reads or a socket there (through links too). The report is written from the program's exit, so a FIFO nobody reads
// held the program at its end for ever (`--report pipe.md`: iscope-run never returned). An empty name was "its
// directory  does not exist". Devices (/dev/null) and a pipe with a reader (/dev/stdout into `| tee`) are written.
std::string report_unwritable(const std::string& report) {
  if (report.empty()) return "the file name is empty; name the report's file (.md, .html or .json)";
  if (const auto why = inferscope::dump::report_target_would_block(absolute(report)))
    return *why + ": the report is written as the program ends, which would wait there for a reader; name a file";
  return unwritable(report);
}

// Where a write to `path` lands, as a path to compare: the end of its symlink chain (followed by hand, so a link to a
// file not there yet leads to that file, as the report writer follows it: dump::AtomicOutput), with the
// directories' links, "." and ".." resolved (weakly_canonical: as far as the path exists).
std::filesystem::path landing_place(const std::string& path) {
  const inferscope::dump::OutputTarget t = inferscope::dump::resolve_output(absolute(path));
  std::error_code ec;
  const std::filesystem::path p = t.error.empty() ? t.path : absolute(path);
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : canonical;
}

// Whether writes to two paths land in one file: the same place once links, "." and ".." are resolved (a link to the
// other, not there yet, included), or one existing file (a hard link).
bool names_one_file(const std::string& a, const std::string& b) {
  return landing_place(a) == landing_place(b) || inferscope::dump::same_file(a, b);
}

// A setting from the command line, checked by the same table the runtime uses, with the flag the user typed
// in the message ("flag --report: ..."), instead of the INFERSCOPE_* variable it travels in.
struct FlagSetting {
  std::string key;       // the config key (trace_size_mb)
  std::string value;
  std::string spelling;  // the flag as typed: "--trace-size-mb", "--set trace_size_mb"
};

std::vector<std::string> flag_problems(const std::vector<FlagSetting>& flags) {
  std::vector<std::string> problems;
  for (const auto& f : flags) {
    cfg::ResolveOptions ro;
    ro.read_environment = false;
    ro.read_file = false;
    ro.flag_spelling = f.spelling;
    ro.flags.emplace_back(f.key, f.value);
    try {
      cfg::resolve(ro);
    } catch (const cfg::ConfigError& e) {
      problems.insert(problems.end(), e.errors().begin(), e.errors().end());
    }
  }
  return problems;
}

// An -o the runtime would refuse, checked before the program runs: a symlink, a special file, or a path another
// live session is writing (its lock file names the pid).
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

int usage_error(const std::string& message, const cxxopts::Options& opts) {
  std::cerr << "iscope-run: " << message << "\n" << opts.help() << "\n" << kExitStatus;
  return kUsage;
}

cxxopts::Options make_options() {
  cxxopts::Options opts("iscope-run", "Records PROGRAM (CPU ranges, Python, CUDA activity) into DUMP without changing it.");
  opts.custom_help("[-o DUMP] [OPTION...] -- PROGRAM [ARGS...]");
  opts.add_options()
      ("o,output", "dump file (default: the setting 'output': --set output, INFERSCOPE_OUTPUT, .inferscope.yaml; "
                   "else ./<program>.<pid>.iscope)", cxxopts::value<std::string>(), "DUMP")
      ("follow-children", "also record child processes (fork, multiprocessing, spawned and exec'd programs); "
                          "each writes <stem>.<pid>.iscope next to DUMP", boolean_flag(), "BOOL")
      ("buffer-mode", "full capture: stream (written as it fills) or ring (flight recorder); either one, given, "
                      "means mode full (the default mode is adaptive: --set mode=...)", cxxopts::value<std::string>(), "MODE")
      ("trace-size-mb", "memory budget of a ring, or of adaptive and sampled windows", cxxopts::value<std::string>(), "N")
      ("no-cupti", "no GPU collection", boolean_flag(), "BOOL")
      ("cupti-activities", "default | minimal | full | none | comma list of kernel, memcpy, memset, sync, memory, "
                           "graph, overhead, api, runtime, driver, api_activity", cxxopts::value<std::string>(), "S")
      ("no-python", "no Python tracing", boolean_flag(), "BOOL")
      ("nvtx-emit", "also emit ISCOPE ranges as NVTX ranges", boolean_flag(), "BOOL")
      ("report", "write a report at exit (.md, .html or .json)", cxxopts::value<std::string>(), "FILE")
      ("live", "serve a live page (step time, breakdown, timeline) and Prometheus /metrics on [ADDR:]PORT while the "
               "program runs; 127.0.0.1 unless ADDR is given; its URL, with a token, is printed on stderr "
               "(docs/live.md)", cxxopts::value<std::string>(), "[ADDR:]PORT")
      ("live-any-address", "allow --live on an address that is not loopback", boolean_flag(), "BOOL")
      ("set", "any other setting (sets INFERSCOPE_<KEY>); repeatable", cxxopts::value<std::vector<std::string>>(), "KEY=VALUE")
      ("library", "libinferscope.so to inject (default: beside this tool; env INFERSCOPE_LIBRARY)",
       cxxopts::value<std::string>(), "PATH")
      ("try", "measure a setting on this program: runs it in pairs of processes, as it is and with KNOB=VALUE, and "
              "says the step time of each with an interval (docs/try.md lists the knobs; a program's own environment "
              "variables are knobs once .inferscope.yaml declares them under try_knobs); repeatable",
       cxxopts::value<std::vector<std::string>>(), "KNOB=VALUE")
      ("try-rounds", "--try: pairs of processes to run (default 5)", cxxopts::value<std::string>(), "N")
      ("q,quiet", "no closing line on stderr", boolean_flag(), "BOOL")
      ("h,help", "this help")
      ("version", "print the version and exit");
  return opts;
}

// What the flags ask for: the child's settings (INFERSCOPE_*) in command-line order so that a later flag wins,
// each also kept as typed, to be checked before anything runs.
struct Plan {
  std::string output, library_override;
  std::string output_named_by;  ///< what named `output`: "-o X", "INFERSCOPE_OUTPUT=X", ... ("" : the default)
  std::vector<std::pair<std::string, std::string>> settings;
  std::vector<FlagSetting> checked;
  std::optional<bool> follow;  ///< --follow-children as given; absent: the settings' follow_children applies
  bool quiet = false;
  std::vector<std::string> try_specs;        ///< --try as typed, read once the settings file is (try_knobs.hpp)
  std::vector<iscope_run::TriedKnob> tried;  ///< --try: the knobs to measure
  int try_rounds = iscope_run::kDefaultTryRounds;
  void setting(const std::string& key, const std::string& value, const std::string& spelling,
               const std::string& as_typed = "") {
    settings.emplace_back(env_key(key), value);
    checked.push_back({key, as_typed.empty() ? value : as_typed, spelling});
  }
};

// A bad --set gives its message in `error`.
Plan plan_of(const cxxopts::ParseResult& args, std::string& error) {
  Plan plan;
  for (const auto& kv : args.arguments()) {
    const std::string& k = kv.key();
    const std::string& v = kv.value();
    if (k == "output" && v.empty()) {  // `-o "$UNSET"`: the dump went to the default path, as if -o were not given
      error = "-o/--output: the file name is empty; name the dump's file, or leave -o out for the default";
      return plan;
    } else if (k == "output") plan.output = v;
    else if (k == "library") plan.library_override = v;
    else if (k == "buffer-mode") plan.setting("buffer_mode", v, "--buffer-mode");
    else if (k == "trace-size-mb") plan.setting("trace_size_mb", v, "--trace-size-mb");
    else if (k == "cupti-activities") plan.setting("cupti_activities", v, "--cupti-activities");
    else if (k == "live") plan.setting("live", v, "--live");
    else if (k == "follow-children" || k == "quiet" || k == "no-cupti" || k == "no-python" || k == "nvtx-emit" ||
             k == "live-any-address") {
      bool on = false;
      if (error = inferscope::tools::parse_boolean_flag(k, v, on); !error.empty()) return plan;
      // Written with a value, a flag sets that value (a flag wins over the environment and the file), so
      // --no-cupti=false turns CUPTI on; a later flag wins over an earlier one.
      if (k == "follow-children") plan.follow = on;
      else if (k == "quiet") plan.quiet = on;
      else if (k == "no-cupti") plan.settings.emplace_back("INFERSCOPE_CUPTI", on ? "0" : "1");
      else if (k == "no-python") plan.settings.emplace_back("INFERSCOPE_PYTHON", on ? "0" : "1");
      else if (k == "live-any-address") plan.setting("live_any_address", on ? "true" : "false", "--live-any-address");
      else plan.settings.emplace_back("INFERSCOPE_NVTX_EMIT", on ? "1" : "0");
    } else if (k == "report") plan.setting("report", absolute(v), "--report", v);
    else if (k == "try") plan.try_specs.push_back(v);
    else if (k == "try-rounds") {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 2 || n > 100) {
        error = "--try-rounds expects a number of pairs from 2 to 100, got '" + v + "'";
        return plan;
      }
      plan.try_rounds = int(n);
    }
    else if (k == "set") {
      const auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        error = "--set expects KEY=VALUE, got '" + v + "'";
        return plan;
      }
      std::string key = v.substr(0, eq);
      for (auto& c : key) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const std::string var = env_key(key);
      // Variables the runtime reads that are not settings (INFERSCOPE_CLOCK, ...) pass through unchecked.
      if (std::find(cfg::kNonSettingEnvironment.begin(), cfg::kNonSettingEnvironment.end(), var) !=
          cfg::kNonSettingEnvironment.end())
        plan.settings.emplace_back(var, v.substr(eq + 1));
      else
        plan.setting(key, v.substr(eq + 1), "--set " + key);
    }
  }
  return plan;
}

// Says each problem on its own line; kUsage when there was one, else 0.
int refused(const std::vector<std::string>& problems) {
  for (const auto& p : problems) std::cerr << "iscope-run: " << p << "\n";
  return problems.empty() ? 0 : kUsage;
}

// The environment the program will see (these flags applied over INFERSCOPE_* and the config file) resolved as the
// runtime will resolve it: a bad value there would make the runtime record nothing, so it is refused now, naming
// the variable or the file. nullopt after saying why.
std::optional<cfg::Resolved> program_settings(const Plan& plan) {
  ::setenv("INFERSCOPE_ENABLE", "1", 1);
  // Only a flag sets it: without one, follow_children comes from INFERSCOPE_FOLLOW_CHILDREN or .inferscope.yaml as
  // the runtime reads them (it was exported as 0 whenever the flag was absent, so those were ignored).
  if (plan.follow) ::setenv("INFERSCOPE_FOLLOW_CHILDREN", *plan.follow ? "1" : "0", 1);
  for (auto& [k, v] : plan.settings) ::setenv(k.c_str(), v.c_str(), 1);
  try {
    return cfg::resolve();
  } catch (const cfg::ConfigError& e) {
    for (const auto& m : e.errors()) std::cerr << "iscope-run: " << m << " (the program would record nothing)\n";
    return std::nullopt;
  }
}

// Without -o the runtime writes where the setting 'output' says (--set output, INFERSCOPE_OUTPUT, .inferscope.yaml),
// so iscope-run checks and names that file too; it used to look for ./<program>.<pid>.iscope while the dump went
// elsewhere. An INFERSCOPE_OUTPUT that an iscope-run above this one handed down (INFERSCOPE_ROOT_PID is set: this
// one runs inside a recorded program) is that run's file, not this one's: the default applies.
void take_output_setting(Plan& plan, const cfg::Resolved& resolved) {
  if (!plan.output.empty()) {
    plan.output_named_by = "-o " + plan.output;
    return;
  }
  const std::string& value = resolved.config.output;
  const std::string& origin = resolved.origin.at("output");
  if (value.empty() || origin == "default") return;
  const bool from_set = std::any_of(plan.settings.begin(), plan.settings.end(),
                                    [](const auto& kv) { return kv.first == "INFERSCOPE_OUTPUT"; });
  const bool from_env = origin.starts_with("env:");
  if (from_env && !from_set && std::getenv("INFERSCOPE_ROOT_PID")) return;
  plan.output = value;
  plan.output_named_by = from_set ? "--set output=" + value
                         : from_env ? "INFERSCOPE_OUTPUT=" + value
                                    : "output: " + value + " in " + origin.substr(origin.find(':') + 1);
}

// The dump's file and the report's, checked before the program runs: each writable, and not one file.
std::vector<std::string> file_problems(const Plan& plan, const cxxopts::ParseResult& args) {
  std::vector<std::string> problems;
  if (!plan.output.empty()) {
    if (const std::string why = unwritable(plan.output); !why.empty()) problems.push_back(plan.output_named_by + ": " + why);
  } else if (const std::string why = unwritable("./iscope-run.probe"); !why.empty()) {
    problems.push_back("the default dump (./<program>.<pid>.iscope): " + why + "; name another with -o");
  }
  if (args.count("report")) {
    const std::string report = args["report"].as<std::string>();
    if (const std::string why = report_unwritable(report); !why.empty()) problems.push_back("--report " + report + ": " + why);
    else if (!plan.output.empty() && names_one_file(plan.output, report))  // the report would replace the dump
      problems.push_back("--report " + report + ": is the dump's own file (" + plan.output_named_by + "); name another file");
  }
  return problems;
}

// --live [ADDR:]PORT (or the setting live): an address the page can be served on, and one other than loopback only
// with live_any_address. "" when fine or off.
std::string live_problem(const inferscope::Config& c) {
  if (c.live.empty()) return "";
  inferscope::live::Listen where;
  return inferscope::live::parse_listen(c.live, c.live_any_address, where);
}

// --try's knobs, among those iscope-run knows and those the settings file declares for this program (try_knobs);
// kUsage after saying what is wrong with one.
int take_tried_knobs(Plan& plan, const cfg::Resolved& resolved) {
  std::vector<std::string> problems;
  for (const auto& d : resolved.try_knobs)
    if (std::string clash = iscope_run::declaration_clash(d); !clash.empty()) problems.push_back(clash);
  for (const std::string& spec : plan.try_specs) {
    std::string error;
    if (std::optional<iscope_run::TriedKnob> knob = iscope_run::parse_try(spec, resolved.try_knobs, error))
      plan.tried.push_back(*knob);
    else
      problems.push_back(error);
  }
  return plan.try_specs.empty() ? 0 : refused(problems);
}

// Everything the user typed is checked before the program runs: one message per bad flag, naming it; then the
// environment and the config file the program will see; then the files it will write (the dump where the
// settings put it). Returns 0 or kUsage.
int check_before_launch(Plan& plan, const cxxopts::ParseResult& args) {
  if (int status = refused(flag_problems(plan.checked))) return status;
  const std::optional<cfg::Resolved> resolved = program_settings(plan);
  if (!resolved) return kUsage;
  take_output_setting(plan, *resolved);
  if (int status = take_tried_knobs(plan, *resolved)) return status;
  if (const std::string why = live_problem(resolved->config); !why.empty()) return refused({why});
  return refused(file_problems(plan, args));
}

// The library to inject: found, loadable as a shared library, and expressible in LD_PRELOAD / LD_LIBRARY_PATH;
// empty after saying why not (exit 127: a program preloaded with /bin/ls ran unrecorded and ended 125).
std::string injected_library(const Plan& plan) {
  const std::string library =
      plan.library_override.empty() ? iscope_run::find_library() : absolute(plan.library_override);
  if (library.find(':') != std::string::npos) {
    std::fprintf(stderr, "iscope-run: the library path %s holds a ':', which LD_PRELOAD and LD_LIBRARY_PATH cannot "
                 "express; install it elsewhere or point INFERSCOPE_LIBRARY at a path without one\n", library.c_str());
    return {};
  }
  if (library.empty() || !iscope_run::exists(library)) {
    std::fprintf(stderr, "iscope-run: cannot find libinferscope.so%s%s; set INFERSCOPE_LIBRARY\n",
                 library.empty() ? "" : " at ", library.c_str());
    return {};
  }
  if (const std::string why = iscope_run::not_loadable(library); !why.empty()) {
    std::fprintf(stderr, "iscope-run: cannot inject %s: %s; name libinferscope.so with --library or INFERSCOPE_LIBRARY\n",
                 library.c_str(), why.c_str());
    return {};
  }
  return library;
}

// In the child: its environment (the contract with lib/runtime/autostart.cpp), then the program.
[[noreturn]] void exec_program(char** program, const std::string& output, const std::string& base,
                               const std::string& library, const std::string& python_dir) {
  const std::string me = std::to_string(::getpid());
  std::string out = output.empty() ? base + "." + me + ".iscope" : output;
  ::setenv("INFERSCOPE_OUTPUT", absolute(out).c_str(), 1);
  ::setenv("INFERSCOPE_ROOT_PID", me.c_str(), 1);
  iscope_run::preload(library);
  ::setenv("CUDA_INJECTION64_PATH", library.c_str(), 1);
  ::setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
  if (!python_dir.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    ::setenv("PYTHONPATH", (old && *old ? python_dir + ":" + old : python_dir).c_str(), 1);
  }
  ::execvp(program[0], program);
  std::fprintf(stderr, "iscope-run: cannot run %s: %s\n", program[0], std::strerror(errno));
  ::_exit(kCannotStart);
}

// Forks, execs the program with the injection set up, forwards termination signals, waits and reports.
int run_program(const Plan& plan, char** program, const std::string& library, const std::string& python_dir) {
  // iscope-run waits for the program to write its dump instead of dying first; a signal sent to it alone is
  // passed on (signals.hpp), one from the terminal reached the program already.
  iscope_run::SignalForwarding signals;
  const std::string name = program[0];
  const std::string base = name.substr(name.rfind('/') + 1);
  iscope_run::FileVersion before;
  if (!plan.output.empty()) before = iscope_run::version_of(absolute(plan.output));
  timespec launched{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &launched);
  pid_t pid = ::fork();
  if (pid < 0) {
    std::fprintf(stderr, "iscope-run: fork failed: %s\n", std::strerror(errno));
    return kCannotStart;
  }
  if (pid == 0) {
    signals.in_program();
    exec_program(program, plan.output, base, library, python_dir);
  }
  signals.forward_to(pid);
  const std::string dump = absolute(plan.output.empty() ? base + "." + std::to_string(pid) + ".iscope" : plan.output);
  if (plan.output.empty()) before = iscope_run::version_of(dump);  // a leftover of an earlier process with this pid
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "iscope-run: waitpid failed: %s\n", std::strerror(errno));
      return kCannotStart;
    }
  }
  signals.program_ended();
  return iscope_run::finish(dump, before, launched, pid, status, plan.quiet);
}

// --try: the program as it is and with the tried knobs, in pairs of processes (try_run.hpp). Each process's dump
// goes to <stem>.try/, the result to <stem>.try.json (stem: the -o file without .iscope, else the program's name).
// Exit 0 with a result (a measured change or none), 2 when a knob does not apply, else the failing run's status.
int run_try_mode(const Plan& plan, char** program, const std::string& library, const std::string& python_dir) {
  std::string stem = plan.output;
  if (stem.size() > 7 && stem.compare(stem.size() - 7, 7, ".iscope") == 0) stem.resize(stem.size() - 7);
  if (stem.empty()) stem = std::string(program[0]).substr(std::string(program[0]).rfind('/') + 1);
  stem = absolute(stem);
  std::error_code ec;
  std::filesystem::create_directories(stem + ".try", ec);
  if (ec) {
    std::fprintf(stderr, "iscope-run: --try: cannot create %s.try: %s\n", stem.c_str(), ec.message().c_str());
    return kUsage;
  }
  auto run = [&](const std::vector<std::pair<std::string, std::string>>& env, const std::string& dump) {
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    for (const auto& [k, v] : env) {
      const char* old = std::getenv(k.c_str());
      saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(k.c_str(), v.c_str(), 1);
    }
    Plan p = plan;
    p.output = dump;
    p.quiet = true;
    const int status = run_program(p, program, library, python_dir);
    for (const auto& [k, old] : saved) old ? (void)::setenv(k.c_str(), old->c_str(), 1) : (void)::unsetenv(k.c_str());
    return status;
  };
  auto dump_of = [&](bool tried, int round) {
    return stem + ".try/" + (tried ? "tried." : "base.") + std::to_string(round + 1) + ".iscope";
  };
  std::fprintf(stderr, "iscope-run: --try %s: %d pairs of processes, dumps in %s.try/\n",
               iscope_run::describe(plan.tried).c_str(), plan.try_rounds, stem.c_str());
  const iscope_run::TryOutcome o = iscope_run::run_try(plan.tried, plan.try_rounds, run, iscope_run::measure_dump, dump_of);
  std::string command = "iscope-run";
  for (const auto& k : plan.tried) command += " --try " + k.knob.name + "=" + k.value;
  command += " --";
  for (char** a = program; *a; ++a) command += " " + std::string(*a);
  std::fputs(iscope_run::describe_outcome(plan.tried, o).c_str(), stderr);
  const std::string result = stem + ".try.json";
  if (FILE* f = std::fopen(result.c_str(), "w")) {
    const std::string j = iscope_run::outcome_json(plan.tried, o, command);
    std::fwrite(j.data(), 1, j.size(), f);
    std::fclose(f);
    std::fprintf(stderr, "iscope-run: --try result in %s\n", result.c_str());
  }
  if (o.refused.empty()) return 0;
  return !o.processes.empty() && o.processes.back().status != 0 ? o.processes.back().status : kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts = make_options();
  const Split split = split_arguments(argc, argv);
  cxxopts::ParseResult args;
  try {
    args = opts.parse(split.options_end, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    return usage_error(e.what(), opts);
  }
  if (args.count("help")) {
    std::cout << opts.help() << "\n" << kExitStatus;
    return 0;
  }
  if (args.count("version")) {
    std::cout << "iscope-run " INFERSCOPE_VERSION_STRING "\n";
    return 0;
  }
  std::string error;
  Plan plan = plan_of(args, error);
  if (!error.empty()) return usage_error(error, opts);
  if (args.count("try-rounds") && plan.try_specs.empty()) return usage_error("--try-rounds without --try: nothing to measure", opts);
  if (split.program >= argc) return usage_error("no program given", opts);
  if (int status = check_before_launch(plan, args)) return status;
  const std::string library = injected_library(plan);
  if (library.empty()) return kCannotStart;
  if (!plan.tried.empty()) return run_try_mode(plan, argv + split.program, library, iscope_run::find_python_dir());
  if (!plan.output.empty() && !output_usable(absolute(plan.output))) return kUsage;
  return run_program(plan, argv + split.program, library, iscope_run::find_python_dir());
}
