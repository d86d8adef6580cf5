// resolve(): each precedence pair, file discovery, and every kind of bad input, with temp files and a
// controlled environment (every INFERSCOPE_* variable of the test runner is removed for each test).
#include <doctest/doctest.h>

#include "config/settings.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

extern char** environ;

namespace cfg = inferscope::config;
namespace fs = std::filesystem;

namespace {

// Removes every INFERSCOPE_* variable for the test's lifetime and restores them afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment() {
    for (char** e = environ; *e; ++e) {
      std::string entry(*e);
      if (entry.rfind("INFERSCOPE_", 0) != 0) continue;
      size_t eq = entry.find('=');
      saved_.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    }
    for (auto& [name, value] : saved_) ::unsetenv(name.c_str());
  }
  ~ScopedEnvironment() {
    for (const std::string& name : set_) ::unsetenv(name.c_str());
    for (auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  void set(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    set_.push_back(name);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
  std::vector<std::string> set_;
};

// A fresh directory that is also the working directory, so ./.inferscope.yaml discovery is under control.
class TempWorkDir {
 public:
  TempWorkDir() : previous_(fs::current_path()) {
    std::string pattern = (fs::temp_directory_path() / "iscope-config-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    fs::current_path(dir_);
  }
  ~TempWorkDir() {
    fs::current_path(previous_);
    fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& content) const {
    fs::path path = dir_ / name;
    std::ofstream(path) << content;
    return path.string();
  }
  const fs::path& path() const { return dir_; }

 private:
  fs::path previous_;
  fs::path dir_;
};

// Every test runs with no INFERSCOPE_* variables and in an empty working directory.
struct Clean {
  ScopedEnvironment env;
  TempWorkDir dir;
};

cfg::ResolveOptions with_flags(std::vector<std::pair<std::string, std::string>> flags) {
  cfg::ResolveOptions options;
  options.flags = std::move(flags);
  return options;
}

// Resolves, expecting failure; returns the error's full message.
std::string resolve_error(const cfg::ResolveOptions& options = {}) {
  try {
    cfg::resolve(options);
  } catch (const cfg::ConfigError& e) {
    return e.what();
  }
  FAIL("resolve() accepted a configuration it should have rejected");
  return "";
}

std::string validate_error(const std::string& path) {
  try {
    cfg::validate_file(path);
  } catch (const cfg::ConfigError& e) {
    return e.what();
  }
  FAIL("validate_file() accepted " << path);
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The runtime calls resolve() from a library constructor (INFERSCOPE_ENABLE=1 autostart), before dynamic
// initializers of other translation units may have run. This constructor is in the test's own object file,
// which the linker places before the library's, so it runs before the library's dynamic initialization.
// A plain array: a std::string here might itself be constructed only after this constructor has run.
char g_resolved_before_main[512];
__attribute__((constructor)) void resolve_before_main() {
  const char* previous = std::getenv("INFERSCOPE_TRACE_SIZE_MB");
  std::string saved = previous ? previous : "";
  ::setenv("INFERSCOPE_TRACE_SIZE_MB", "42", 1);
  try {
    cfg::ResolveOptions options;
    options.read_file = false;
    std::string result = std::to_string(cfg::resolve(options).config.trace_size_mb);
    std::snprintf(g_resolved_before_main, sizeof g_resolved_before_main, "%s", result.c_str());
  } catch (const std::exception& e) {
    std::snprintf(g_resolved_before_main, sizeof g_resolved_before_main, "%s", e.what());
  }
  if (previous) ::setenv("INFERSCOPE_TRACE_SIZE_MB", saved.c_str(), 1);
  else ::unsetenv("INFERSCOPE_TRACE_SIZE_MB");
}

}  // namespace

TEST_CASE("resolve() works from a constructor that runs before static initialization") {
  CHECK(std::string(g_resolved_before_main) == "42");
}

TEST_CASE("with no file, environment or flags every setting is its default") {
  Clean clean;
  cfg::Resolved r = cfg::resolve();
  const inferscope::Config defaults;
  CHECK(r.config_file.empty());
  REQUIRE(r.origin.size() == cfg::keys().size());
  for (const cfg::KeyInfo& key : cfg::keys()) {
    CHECK_MESSAGE(r.origin.at(key.key) == "default", key.key);
    CHECK(cfg::value_text(r.config, key.key) == cfg::value_text(defaults, key.key));
  }
}

TEST_CASE("the key table covers every field documented in config.hpp, in order") {
  // Each Config field's doc comment starts with its key ("///< trace_size_mb: ..."); a field added to the
  // header without a table row (or a row for a removed field) fails here.
  std::ifstream header(std::string(INFERSCOPE_SOURCE_DIR) + "/include/inferscope/config.hpp");
  REQUIRE(header);
  std::stringstream text;
  text << header.rdbuf();
  const std::string content = text.str();
  std::vector<std::string> documented;
  const std::regex field_doc(R"(;\s*///<\s*([a-z0-9_]+):)");
  for (auto it = std::sregex_iterator(content.begin(), content.end(), field_doc); it != std::sregex_iterator(); ++it)
    documented.push_back((*it)[1]);
  std::vector<std::string> table;
  for (const cfg::KeyInfo& key : cfg::keys()) table.push_back(key.key);
  CHECK(documented == table);
  CHECK(table.size() >= 26);
}

TEST_CASE("every default reads back as itself from each source") {
  Clean clean;
  // The formatted default must be accepted by the parser: guards ranges and choices that exclude the default.
  for (const cfg::KeyInfo& key : cfg::keys()) {
    CAPTURE(key.key);
    CHECK(key.env == "INFERSCOPE_" + [&] {
      std::string upper = key.key;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return upper;
    }());
    cfg::Resolved from_flag = cfg::resolve(with_flags({{key.key, key.default_value}}));
    CHECK(cfg::value_text(from_flag.config, key.key) == key.default_value);
    CHECK(from_flag.origin.at(key.key) == "flag:--" + key.key);
  }
}

TEST_CASE("default_output_path names the process") {
  CHECK(inferscope::default_output_path() == "inferscope-" + std::to_string(::getpid()) + ".iscope");
}

// --- precedence: one test per pair ----------------------------------------------------------------------

TEST_CASE("precedence: file over default") {
  Clean clean;
  std::string path = clean.dir.write(".inferscope.yaml", "# comment\nbuffer_mode: ring\ntrace_size_mb: 8\n");
  cfg::Resolved r = cfg::resolve();
  CHECK(r.config.trace_size_mb == 8);
  CHECK(r.config.buffer_mode == inferscope::BufferMode::kRing);
  CHECK(r.origin.at("trace_size_mb") == "file:" + path + ":3");
  CHECK(r.origin.at("buffer_mode") == "file:" + path + ":2");
  CHECK(r.origin.at("output") == "default");
  CHECK(r.config_file == path);
}

TEST_CASE("precedence: environment over default") {
  Clean clean;
  clean.env.set("INFERSCOPE_ENABLE", "1");
  clean.env.set("INFERSCOPE_LOG_LEVEL", "debug");
  cfg::Resolved r = cfg::resolve();
  CHECK(r.config.enable);
  CHECK(r.config.log_level == inferscope::LogLevel::kDebug);
  CHECK(r.origin.at("enable") == "env:INFERSCOPE_ENABLE");
  CHECK(r.origin.at("trace_size_mb") == "default");
}

TEST_CASE("precedence: flag over default") {
  Clean clean;
  cfg::ResolveOptions options = with_flags({{"report", "out.html"}});
  options.flag_spelling = "--set {key}";
  cfg::Resolved r = cfg::resolve(options);
  CHECK(r.config.report == "out.html");
  CHECK(r.origin.at("report") == "flag:--set report");
}

TEST_CASE("precedence: environment over file") {
  Clean clean;
  std::string path = clean.dir.write(".inferscope.yaml", "trace_size_mb: 8\nflush_period_ms: 5\n");
  clean.env.set("INFERSCOPE_TRACE_SIZE_MB", "16");
  cfg::Resolved r = cfg::resolve();
  CHECK(r.config.trace_size_mb == 16);
  CHECK(r.origin.at("trace_size_mb") == "env:INFERSCOPE_TRACE_SIZE_MB");
  CHECK(r.config.flush_period_ms == 5);  // the file still applies where the environment is silent
  CHECK(r.origin.at("flush_period_ms") == "file:" + path + ":2");
}

TEST_CASE("precedence: flag over file") {
  Clean clean;
  clean.dir.write(".inferscope.yaml", "output: from-file.iscope\n");
  cfg::Resolved r = cfg::resolve(with_flags({{"output", "from-flag.iscope"}}));
  CHECK(r.config.output == "from-flag.iscope");
  CHECK(r.origin.at("output") == "flag:--output");
}

TEST_CASE("precedence: flag over environment") {
  Clean clean;
  clean.env.set("INFERSCOPE_LAUNCH_BOUND_MAX_KERNEL_US", "7.5");
  cfg::Resolved r = cfg::resolve(with_flags({{"launch_bound_max_kernel_us", "2.25"}}));
  CHECK(r.config.launch_bound_max_kernel_us == 2.25);
  CHECK(r.origin.at("launch_bound_max_kernel_us") == "flag:--launch_bound_max_kernel_us");
}

TEST_CASE("precedence: all four sources at once, each key from its highest source") {
  Clean clean;
  std::string path = clean.dir.write(".inferscope.yaml",
                                     "trace_size_mb: 8\nsample_period_ms: 11\nflush_period_ms: 12\n");
  clean.env.set("INFERSCOPE_TRACE_SIZE_MB", "16");
  clean.env.set("INFERSCOPE_SAMPLE_PERIOD_MS", "21");
  cfg::Resolved r = cfg::resolve(with_flags({{"trace_size_mb", "32"}}));
  CHECK(r.config.trace_size_mb == 32);
  CHECK(r.config.sample_period_ms == 21);
  CHECK(r.config.flush_period_ms == 12);
  CHECK(r.config.calibration_period_ms == 1000);
  CHECK(r.origin.at("trace_size_mb") == "flag:--trace_size_mb");
  CHECK(r.origin.at("sample_period_ms") == "env:INFERSCOPE_SAMPLE_PERIOD_MS");
  CHECK(r.origin.at("flush_period_ms") == "file:" + path + ":3");
  CHECK(r.origin.at("calibration_period_ms") == "default");
}

TEST_CASE("a later flag for the same key wins") {
  Clean clean;
  cfg::Resolved r = cfg::resolve(with_flags({{"python_max_depth", "3"}, {"python_max_depth", "9"}}));
  CHECK(r.config.python_max_depth == 9);
}

// --- which file -----------------------------------------------------------------------------------------

TEST_CASE("the config file: --config, then INFERSCOPE_CONFIG, then ./.inferscope.yaml") {
  Clean clean;
  clean.dir.write(".inferscope.yaml", "step: from-cwd\n");
  std::string env_file = clean.dir.write("env.yaml", "step: from-env\n");
  std::string flag_file = clean.dir.write("flag.yaml", "step: from-flag\n");

  CHECK(cfg::resolve().config.step == "from-cwd");

  clean.env.set("INFERSCOPE_CONFIG", env_file);
  cfg::Resolved r = cfg::resolve();
  CHECK(r.config.step == "from-env");
  CHECK(r.origin.at("step") == "file:" + env_file + ":1");

  cfg::ResolveOptions options;
  options.config_path = flag_file;
  r = cfg::resolve(options);
  CHECK(r.config.step == "from-flag");
  CHECK(r.config_file == flag_file);
}

TEST_CASE("read_file and read_environment switch their sources off") {
  Clean clean;
  clean.dir.write(".inferscope.yaml", "trace_size_mb: 8\n");
  clean.env.set("INFERSCOPE_TRACE_SIZE_MB", "16");
  clean.env.set("INFERSCOPE_CONFIG", clean.dir.write("other.yaml", "trace_size_mb: 4\n"));
  cfg::ResolveOptions options;
  options.read_environment = false;
  CHECK(cfg::resolve(options).config.trace_size_mb == 8);  // INFERSCOPE_CONFIG is environment too
  options.read_file = false;
  CHECK(cfg::resolve(options).config.trace_size_mb == 100);
  options.read_environment = true;
  CHECK(cfg::resolve(options).config.trace_size_mb == 16);
}

TEST_CASE("an explicitly named config file must exist; the working directory's is optional") {
  Clean clean;
  cfg::ResolveOptions options;
  options.config_path = (clean.dir.path() / "missing.yaml").string();
  std::string error = resolve_error(options);
  CHECK(contains(error, "missing.yaml"));
  CHECK(contains(error, "--config"));

  clean.env.set("INFERSCOPE_CONFIG", "/nonexistent/inferscope.yaml");
  error = resolve_error();
  CHECK(contains(error, "/nonexistent/inferscope.yaml"));
  CHECK(contains(error, "INFERSCOPE_CONFIG"));
}

TEST_CASE("an empty or comment-only file sets nothing") {
  Clean clean;
  clean.dir.write(".inferscope.yaml", "# nothing yet\n");
  cfg::Resolved r = cfg::resolve();
  CHECK(r.origin.at("enable") == "default");
  CHECK(r.config_file == (clean.dir.path() / ".inferscope.yaml").string());
}

// --- bad input in the file ------------------------------------------------------------------------------

TEST_CASE("file: an unknown key is named with file, line and the closest known key") {
  Clean clean;
  std::string path = clean.dir.write("c.yaml", "enable: true\ntrace_size: 8\n");
  CHECK(validate_error(path) == path + ":2: unknown key 'trace_size'; did you mean 'trace_size_mb'?");
  path = clean.dir.write("c2.yaml", "Trace_Size_MB: 8\n");
  CHECK(contains(validate_error(path), "unknown key 'Trace_Size_MB'; did you mean 'trace_size_mb'?"));
  path = clean.dir.write("d.yaml", "bufer_mode: ring\n");
  CHECK(contains(validate_error(path), "did you mean 'buffer_mode'?"));
  // Nothing close: no misleading guess, but a pointer to the list.
  path = clean.dir.write("e.yaml", "colour: blue\n");
  std::string error = validate_error(path);
  CHECK(contains(error, path + ":1: unknown key 'colour'"));
  CHECK_FALSE(contains(error, "did you mean"));
  CHECK(contains(error, "iscope-config keys"));
}

TEST_CASE("file: a wrong type names file, line, key and what is allowed") {
  Clean clean;
  std::string path = clean.dir.write("c.yaml", "output: a.iscope\n\nenable: maybe\n");
  CHECK(validate_error(path) ==
        path + ":3: enable: 'maybe' is not a boolean; allowed: true or false (also yes/no, on/off, 1/0)");
  path = clean.dir.write("d.yaml", "trace_size_mb: lots\n");
  CHECK(validate_error(path) == path + ":1: trace_size_mb: 'lots' is not an integer; allowed: an integer in [1, 65536]");
  path = clean.dir.write("e.yaml", "launch_bound_max_kernel_us: soon\n");
  CHECK(contains(validate_error(path), ":1: launch_bound_max_kernel_us: 'soon' is not a number; allowed: a number in [0.1, 1000000]"));
  path = clean.dir.write("f.yaml", "buffer_mode: circular\n");
  CHECK(validate_error(path) == path + ":1: buffer_mode: 'circular' is not an allowed value; allowed: one of: stream, ring");
  path = clean.dir.write("g.yaml", "python_mode: verbose\n");
  CHECK(contains(validate_error(path), "allowed: one of: default, full, off"));
}

TEST_CASE("file: an out-of-range value names file, line, key and the range") {
  Clean clean;
  std::string path = clean.dir.write("c.yaml", "trace_size_mb: 0\n");
  CHECK(validate_error(path) == path + ":1: trace_size_mb: 0 is out of range; allowed: an integer in [1, 65536]");
  path = clean.dir.write("d.yaml", "flush_period_ms: -5\n");
  CHECK(contains(validate_error(path), "flush_period_ms: -5 is out of range"));
  path = clean.dir.write("e.yaml", "calibration_period_ms: 99999999999999999999999\n");
  CHECK(contains(validate_error(path), "is out of range; allowed: an integer in [10, 600000]"));
  path = clean.dir.write("f.yaml", "thread_buffer_kb: 1000\n");
  CHECK(validate_error(path) ==
        path + ":1: thread_buffer_kb: 1000 is not a power of two; allowed: a power of two in [64, 262144]");
  path = clean.dir.write("g.yaml", "launch_bound_max_kernel_us: 0\n");
  CHECK(contains(validate_error(path), "launch_bound_max_kernel_us: 0 is out of range; allowed: a number in [0.1, 1000000]"));
}

TEST_CASE("file: structure errors — nested values, duplicates, empty values, not a mapping") {
  Clean clean;
  std::string path = clean.dir.write("c.yaml", "trace_size_mb:\n  value: 8\n");
  CHECK(contains(validate_error(path), path + ":1: trace_size_mb: expected a single value, got a mapping"));
  path = clean.dir.write("d.yaml", "output: [a, b]\n");
  CHECK(contains(validate_error(path), "output: expected a single value, got a sequence"));
  path = clean.dir.write("e.yaml", "enable: true\nstep: x\nenable: false\n");
  CHECK(validate_error(path) == path + ":3: enable: set twice (first at line 1)");
  path = clean.dir.write("f.yaml", "trace_size_mb:\n");
  CHECK(contains(validate_error(path), "trace_size_mb: the value is empty"));
  path = clean.dir.write("g.yaml", "- enable\n- trace_size_mb\n");
  CHECK(contains(validate_error(path), path + ":1: expected settings as 'key: value' lines, got a sequence"));
}

TEST_CASE("file: a second YAML document is refused, not ignored") {
  Clean clean;
  std::string path = clean.dir.write("c.yaml", "enable: true\n---\ntrace_size_mb: 8\n");
  CHECK(validate_error(path) == path + ":3: a config file holds one YAML document; this is a second one");
  // A leading "---" starts the only document and is fine.
  clean.dir.write(".inferscope.yaml", "---\ntrace_size_mb: 8\n");
  CHECK(cfg::resolve().config.trace_size_mb == 8);
}

TEST_CASE("file: a YAML syntax error names file and line") {
  Clean clean;
  std::string path = clean.dir.write("c.yaml", "enable: true\ntrace_size_mb: 8\n  output: \"unterminated\n");
  std::string error = validate_error(path);
  CHECK(contains(error, path + ":3:"));
  CHECK(contains(error, "YAML syntax error"));
  path = clean.dir.write("d.yaml", "enable: true\nstep: [a, b\n");
  error = validate_error(path);
  CHECK(error.rfind(path + ":", 0) == 0);
  CHECK(contains(error, "YAML syntax error"));
}

TEST_CASE("file: a quoted string left open is a syntax error, not a value swallowing the next lines") {
  Clean clean;
  std::string path = clean.dir.write("c.yaml", "trace_size_mb: 8\nstep: \"open\nenable: true\n");
  CHECK(validate_error(path) == path + ":2:7: YAML syntax error: a quoted string is never closed");
  path = clean.dir.write("d.yaml", "step: 'it''s open\n");
  CHECK(contains(validate_error(path), path + ":1:7: YAML syntax error"));
  // Escaped quotes inside a closed string are fine.
  clean.dir.write(".inferscope.yaml", "step: \"say \\\"hi\\\"\"\noutput: 'it''s.iscope'\n");
  cfg::Resolved r = cfg::resolve();
  CHECK(r.config.step == "say \"hi\"");
  CHECK(r.config.output == "it's.iscope");
}

TEST_CASE("file: list settings accept a comma list or a YAML sequence; strings accept null as empty") {
  Clean clean;
  clean.dir.write(".inferscope.yaml",
                  "python_include: [torch, mymodel]\npython_exclude: a,b\ncupti_activities: kernel,memcpy,nvtx\n"
                  "step: ~\n");
  cfg::Resolved r = cfg::resolve();
  CHECK(r.config.python_include == "torch,mymodel");
  CHECK(r.config.python_exclude == "a,b");
  CHECK(r.config.cupti_activities == "kernel,memcpy,nvtx");
  CHECK(r.config.step.empty());
  CHECK(r.origin.at("step") != "default");
}

TEST_CASE("cupti_activities accepts presets and activity kinds only") {
  Clean clean;
  CHECK(cfg::resolve(with_flags({{"cupti_activities", "minimal"}})).config.cupti_activities == "minimal");
  CHECK(cfg::resolve(with_flags({{"cupti_activities", "default,nvtx"}})).config.cupti_activities == "default,nvtx");
  CHECK(cfg::resolve(with_flags({{"cupti_activities", "default,api_activity"}})).config.cupti_activities ==
        "default,api_activity");
  CHECK(cfg::resolve(with_flags({{"cupti_activities", "default,api_callbacks"}})).config.cupti_activities ==
        "default,api_callbacks");
  CHECK(contains(resolve_error(with_flags({{"cupti_activities", "kernel,gpu"}})), "'gpu' is not a CUPTI preset"));
  // Read as the collector reads it: spaces around names and empty items are fine.
  CHECK(cfg::resolve(with_flags({{"cupti_activities", "kernel, memcpy,"}})).config.cupti_activities == "kernel, memcpy,");
  CHECK(contains(resolve_error(with_flags({{"cupti_activities", "kernel, gpu "}})), "'gpu' is not a CUPTI preset"));
  CHECK(contains(resolve_error(with_flags({{"cupti_activities", ""}})), "the list is empty"));
  // A list of empty items names nothing either (it was accepted while "" was refused).
  CHECK(contains(resolve_error(with_flags({{"cupti_activities", ",,,"}})), "the list is empty"));
  CHECK(contains(resolve_error(with_flags({{"cupti_activities", " , "}})), "the list is empty"));
}

TEST_CASE("report must name a format by its extension") {
  Clean clean;
  CHECK(cfg::resolve(with_flags({{"report", "r.json"}})).config.report == "r.json");
  CHECK(cfg::resolve(with_flags({{"report", ""}})).config.report.empty());
  CHECK(contains(resolve_error(with_flags({{"report", "r.pdf"}})), "report: 'r.pdf' does not end in .md, .html or .json"));
}

TEST_CASE("sampled mode: mode takes full or sampled; the window and slow-step keys have ranges") {
  Clean clean;
  cfg::Resolved r = cfg::resolve(with_flags({{"mode", "sampled"}, {"window_steps", "5"}, {"window_every_steps", "50"},
                                             {"slow_step_ms", "12.5"}, {"slow_step_percentile", "90"}}));
  CHECK(r.config.mode == inferscope::CaptureMode::kSampled);
  CHECK(r.config.window_steps == 5);
  CHECK(r.config.window_every_steps == 50);
  CHECK(r.config.slow_step_ms == 12.5);
  CHECK(r.config.slow_step_percentile == 90);
  CHECK(contains(resolve_error(with_flags({{"mode", "always"}})), "mode: 'always' is not an allowed value; allowed: one of: full, sampled"));
  CHECK(contains(resolve_error(with_flags({{"window_steps", "0"}})), "window_steps: 0 is out of range"));
  CHECK(contains(resolve_error(with_flags({{"slow_step_percentile", "100"}})), "slow_step_percentile: 100 is out of range"));
  CHECK(contains(resolve_error(with_flags({{"windows_kept", "0"}})), "windows_kept: 0 is out of range"));
}

TEST_CASE("sampled mode: a window as long as its period is refused, naming both keys and where each came from") {
  Clean clean;
  std::string path = clean.dir.write(".inferscope.yaml", "mode: sampled\nwindow_steps: 600\n");
  std::string error = resolve_error();
  CHECK(contains(error, "window_steps = 600 (file:" + path + ":2) must be smaller than window_every_steps = 500 (default)"));
  CHECK(contains(error, "use mode: full"));
  CHECK(contains(validate_error(path), "window_steps = 600"));
  // Timed windows, from the environment this time; and both problems at once.
  clean.env.set("INFERSCOPE_WINDOW_MS", "20000");
  error = resolve_error();
  CHECK(contains(error, "window_ms = 20000 (env:INFERSCOPE_WINDOW_MS) must be smaller than window_every_ms = 10000"));
  CHECK(contains(error, "window_steps = 600"));
}

TEST_CASE("sampled mode: the window checks apply only when sampling, and a lenient tool notes them") {
  Clean clean;
  // mode: full uses none of them; adaptive, the default, does.
  CHECK(cfg::resolve(with_flags({{"mode", "full"}, {"window_steps", "600"}})).config.window_steps == 600);
  CHECK(contains(resolve_error(with_flags({{"window_steps", "600"}})), "mode: adaptive: window_steps = 600"));
  clean.dir.write(".inferscope.yaml", "mode: sampled\nwindow_steps: 600\n");
  cfg::ResolveOptions lenient;
  lenient.lenient_sources = true;
  cfg::Resolved r = cfg::resolve(lenient);
  REQUIRE(r.ignored.size() == 1);
  CHECK(contains(r.ignored[0], "window_steps = 600"));
}

TEST_CASE("mode: adaptive by default; buffer_mode given alone means full capture (a ring or a stream), a mode that was set stays") {
  Clean clean;
  const cfg::Resolved plain = cfg::resolve();
  CHECK(plain.config.mode == inferscope::CaptureMode::kAdaptive);
  CHECK(plain.origin.at("mode") == "default");
  const cfg::Resolved ring = cfg::resolve(with_flags({{"buffer_mode", "ring"}}));
  CHECK(ring.config.mode == inferscope::CaptureMode::kFull);
  CHECK(ring.config.buffer_mode == inferscope::BufferMode::kRing);
  CHECK(ring.origin.at("mode") == "default, full because buffer_mode is set");
  // Stream given explicitly: full capture streamed, as it was the default before.
  CHECK(cfg::resolve(with_flags({{"buffer_mode", "stream"}})).config.mode == inferscope::CaptureMode::kFull);
  CHECK(cfg::resolve(with_flags({{"buffer_mode", "ring"}, {"mode", "sampled"}})).config.mode == inferscope::CaptureMode::kSampled);
  CHECK(cfg::resolve(with_flags({{"mode", "full"}})).config.mode == inferscope::CaptureMode::kFull);
  // From a program's own Config: ring set in code, mode left alone.
  inferscope::Config code;
  code.buffer_mode = inferscope::BufferMode::kRing;
  cfg::ResolveOptions from_code;
  from_code.code = &code;
  CHECK(cfg::resolve(from_code).config.mode == inferscope::CaptureMode::kFull);
}

TEST_CASE("booleans accept the usual spellings, case-insensitively, and nothing else") {
  Clean clean;
  for (const char* yes : {"true", "True", "1", "yes", "ON"})
    CHECK_MESSAGE(cfg::resolve(with_flags({{"nvtx_emit", yes}})).config.nvtx_emit, yes);
  for (const char* no : {"false", "FALSE", "0", "no", "off"})
    CHECK_MESSAGE(!cfg::resolve(with_flags({{"cupti", no}})).config.cupti, no);
  for (const char* bad : {"2", "y", "", "enabled"})
    CHECK_MESSAGE(contains(resolve_error(with_flags({{"cupti", bad}})), "cupti: "), bad);
}

TEST_CASE("numbers must be plain decimal text") {
  Clean clean;
  for (const char* bad : {"1e3", " 8", "8 ", "0x10", "+8", "8.0"})
    CHECK_MESSAGE(contains(resolve_error(with_flags({{"trace_size_mb", bad}})), "is not an integer"), bad);
  for (const char* bad : {"inf", "nan", "1,5", "5us"})
    CHECK_MESSAGE(contains(resolve_error(with_flags({{"launch_bound_max_kernel_us", bad}})), "launch_bound_max_kernel_us: "), bad);
  CHECK(cfg::resolve(with_flags({{"launch_bound_max_kernel_us", "1e-1"}})).config.launch_bound_max_kernel_us == 0.1);
}

// --- bad input in the environment -----------------------------------------------------------------------

TEST_CASE("environment: a wrong type or range names the variable, the key and what is allowed") {
  Clean clean;
  clean.env.set("INFERSCOPE_TRACE_SIZE_MB", "huge");
  CHECK(resolve_error() == "environment variable INFERSCOPE_TRACE_SIZE_MB: trace_size_mb: 'huge' is not an integer; "
                           "allowed: an integer in [1, 65536]");
  clean.env.set("INFERSCOPE_TRACE_SIZE_MB", "70000");
  CHECK(resolve_error() == "environment variable INFERSCOPE_TRACE_SIZE_MB: trace_size_mb: 70000 is out of range; "
                           "allowed: an integer in [1, 65536]");
  clean.env.set("INFERSCOPE_TRACE_SIZE_MB", "64");
  clean.env.set("INFERSCOPE_BUFFER_MODE", "Ring");
  CHECK(contains(resolve_error(), "INFERSCOPE_BUFFER_MODE: buffer_mode: 'Ring' is not an allowed value"));
}

TEST_CASE("environment: an unknown INFERSCOPE_ variable is an error with the closest setting") {
  Clean clean;
  clean.env.set("INFERSCOPE_TRACE_SIZE", "8");
  CHECK(resolve_error() ==
        "environment variable INFERSCOPE_TRACE_SIZE: not an InferScope setting; did you mean INFERSCOPE_TRACE_SIZE_MB?");
}

TEST_CASE("environment: only the upper-case spelling is a setting") {
  Clean clean;
  clean.env.set("INFERSCOPE_log_level", "info");
  CHECK(contains(resolve_error(), "INFERSCOPE_log_level: not an InferScope setting; did you mean INFERSCOPE_LOG_LEVEL?"));
}

TEST_CASE("environment: variables the runtime uses itself are not settings and not errors") {
  Clean clean;
  for (std::string_view name : cfg::kNonSettingEnvironment) clean.env.set(std::string(name), "1");
  clean.env.set("INFERSCOPE_CONFIG", "");  // empty: no file named
  cfg::Resolved r = cfg::resolve();
  for (const cfg::KeyInfo& key : cfg::keys()) CHECK(r.origin.at(key.key) == "default");
  CHECK(std::find(cfg::kNonSettingEnvironment.begin(), cfg::kNonSettingEnvironment.end(), "INFERSCOPE_CHILD") !=
        cfg::kNonSettingEnvironment.end());
}

TEST_CASE("variables that do not start with INFERSCOPE_ are not InferScope's business") {
  Clean clean;
  clean.env.set("INFERSCOPEX_TRACE", "1");
  clean.env.set("MY_INFERSCOPE_TRACE_SIZE_MB", "oops");
  CHECK(cfg::resolve().origin.at("trace_size_mb") == "default");
}

// --- bad flags, and several problems at once ------------------------------------------------------------

TEST_CASE("flags: unknown keys and bad values name the flag as the tool spells it") {
  Clean clean;
  cfg::ResolveOptions options = with_flags({{"trace_sise_mb", "8"}});
  options.flag_spelling = "--set {key}";
  CHECK(resolve_error(options) == "flag --set trace_sise_mb: unknown key 'trace_sise_mb'; did you mean 'trace_size_mb'?");
  options.flags = {{"log_level", "loud"}};
  CHECK(resolve_error(options) ==
        "flag --set log_level: log_level: 'loud' is not an allowed value; allowed: one of: error, warn, info, debug");
}

TEST_CASE("every problem of every source is reported, and nothing is half-applied") {
  Clean clean;
  std::string path = clean.dir.write(".inferscope.yaml", "trace_size_mb: 8\nenable: perhaps\nfrobnicate: 1\n");
  clean.env.set("INFERSCOPE_SAMPLE_PERIOD_MS", "0");
  try {
    cfg::resolve(with_flags({{"python_mode", "loud"}}));
    FAIL("resolve() accepted four errors");
  } catch (const cfg::ConfigError& e) {
    REQUIRE(e.errors().size() == 4);
    CHECK(e.errors()[0].rfind(path + ":2: enable:", 0) == 0);
    CHECK(e.errors()[1].rfind(path + ":3: unknown key 'frobnicate'", 0) == 0);
    CHECK(e.errors()[2].rfind("environment variable INFERSCOPE_SAMPLE_PERIOD_MS: sample_period_ms:", 0) == 0);
    CHECK(e.errors()[3].rfind("flag --python_mode: python_mode:", 0) == 0);
    CHECK(std::string(e.what()) == e.errors()[0] + "\n" + e.errors()[1] + "\n" + e.errors()[2] + "\n" + e.errors()[3]);
  }
  // A value fixed at a higher precedence does not excuse a broken lower one.
  clean.dir.write(".inferscope.yaml", "trace_size_mb: 0\n");
  clean.env.set("INFERSCOPE_SAMPLE_PERIOD_MS", "5");
  CHECK(contains(resolve_error(with_flags({{"trace_size_mb", "8"}})), "trace_size_mb: 0 is out of range"));
}

TEST_CASE("a ConfigError built from one message lists it") {
  cfg::ConfigError e("one problem");
  REQUIRE(e.errors().size() == 1);
  CHECK(e.errors()[0] == "one problem");
}

// --- renderings -----------------------------------------------------------------------------------------

TEST_CASE("show's text output is a config file that reproduces the same settings") {
  Clean clean;
  cfg::Resolved r = cfg::resolve(with_flags({{"output", "a \"quoted\": name.iscope"},
                                             {"buffer_mode", "ring"},
                                             {"step", "yes"},  // must stay the string "yes", not become a bool
                                             {"python_include", "torch,my model"},
                                             {"launch_bound_max_kernel_us", "0.125"},
                                             {"nvtx_emit", "on"}}));
  std::string shown = cfg::format_show(r);
  CHECK(contains(shown, "# flag --output\n"));
  CHECK(contains(shown, "\ntrace_size_mb: 100 "));
  std::string path = clean.dir.write("shown.yaml", shown);
  cfg::ResolveOptions options;
  options.config_path = path;
  cfg::Resolved again = cfg::resolve(options);
  for (const cfg::KeyInfo& key : cfg::keys()) {
    CAPTURE(key.key);
    CHECK(cfg::value_text(again.config, key.key) == cfg::value_text(r.config, key.key));
    CHECK(again.origin.at(key.key).rfind("file:" + path + ":", 0) == 0);
  }
}

TEST_CASE("show names each source in readable form") {
  Clean clean;
  std::string path = clean.dir.write(".inferscope.yaml", "trace_size_mb: 8\n");
  clean.env.set("INFERSCOPE_ENABLE", "yes");
  std::string shown = cfg::format_show(cfg::resolve());
  CHECK(contains(shown, "# config file: " + path + "\n"));
  CHECK(contains(shown, "# file " + path + ":1\n"));
  CHECK(contains(shown, "# env INFERSCOPE_ENABLE\n"));
  CHECK(contains(shown, "# default\n"));
}

TEST_CASE("show --json types values and gives sources") {
  Clean clean;
  cfg::Resolved r = cfg::resolve(with_flags({{"trace_size_mb", "8"}, {"step", "a\\b\"c"}}));
  std::string json = cfg::format_show_json(r);
  CHECK(contains(json, "\"config_file\": null"));
  CHECK(contains(json, "\"trace_size_mb\": {\"value\": 8, \"source\": \"flag:--trace_size_mb\"}"));
  CHECK(contains(json, "\"enable\": {\"value\": false, \"source\": \"default\"}"));
  CHECK(contains(json, "\"step\": {\"value\": \"a\\\\b\\\"c\""));
  CHECK(contains(json, "\"buffer_mode\": {\"value\": \"stream\""));
}

TEST_CASE("keys --markdown has one row per key") {
  std::string markdown = cfg::format_keys_markdown();
  for (const cfg::KeyInfo& key : cfg::keys()) {
    CAPTURE(key.key);
    CHECK(contains(markdown, "| `" + key.key + "` | `" + key.env + "` | " + key.type + " |"));
  }
  CHECK(contains(markdown, "| `thread_buffer_kb` | `INFERSCOPE_THREAD_BUFFER_KB` | integer | `1024` | a power of two in [64, 262144] |"));
}

TEST_CASE("file: try_knobs declares a program's own environment variables for iscope-run --try") {
  Clean clean;
  cfg::ResolveOptions options;
  options.config_path = clean.dir.write("k.yaml",
                                        "trace_size_mb: 64\n"
                                        "try_knobs:\n"
                                        "  - variable: POOL_THREADS\n"
                                        "    values: 1..64\n"
                                        "    changes: threads of the request pool\n"
                                        "  - variable: SERVER_BATCHING\n"
                                        "    values: [off, dynamic]\n"
                                        "    changes: how requests are batched\n"
                                        "    changes_results: yes\n");
  const cfg::Resolved r = cfg::resolve(options);
  CHECK(r.config.trace_size_mb == 64);  // the settings around the section still apply
  REQUIRE(r.try_knobs.size() == 2);
  CHECK(r.try_knobs[0].variable == "POOL_THREADS");
  CHECK(r.try_knobs[0].values_text() == "an integer, 1 to 64");
  CHECK(r.try_knobs[0].accepted("016") == "16");
  CHECK(r.try_knobs[0].accepted("65").empty());
  CHECK(r.try_knobs[0].where == options.config_path + ":3");
  CHECK_FALSE(r.try_knobs[0].changes_results);
  CHECK(r.try_knobs[1].values_text() == "off or dynamic");
  CHECK(r.try_knobs[1].accepted("dynamic") == "dynamic");
  CHECK(r.try_knobs[1].accepted("static").empty());
  CHECK(r.try_knobs[1].changes_results);
}

TEST_CASE("file: a bad try_knobs declaration names the file, the line and the field") {
  Clean clean;
  auto error_of = [&](const std::string& body) {
    return validate_error(clean.dir.write("bad.yaml", "try_knobs:\n" + body));
  };
  const std::string at = (clean.dir.path() / "bad.yaml").string();
  CHECK(contains(validate_error(clean.dir.write("m.yaml", "try_knobs:\n  variable: X\n")),
                 "try_knobs: expected a list of declarations"));
  CHECK(contains(error_of("  - variable: 9LIVES\n    values: [1]\n    changes: x\n"), at + ":2: try_knobs: variable:"));
  CHECK(contains(error_of("  - variable: INFERSCOPE_MODE\n    values: [1]\n    changes: x\n"), "take --set"));
  CHECK(contains(error_of("  - variable: LD_PRELOAD\n    values: [1]\n    changes: x\n"), "iscope-run sets"));
  CHECK(contains(error_of("  - variable: A\n    changes: x\n"), "values: missing"));
  CHECK(contains(error_of("  - variable: A\n    values: 64..1\n    changes: x\n"), "runs backwards"));
  CHECK(contains(error_of("  - variable: A\n    values: lots\n    changes: x\n"), "a range of integers"));
  CHECK(contains(error_of("  - variable: A\n    values: []\n    changes: x\n"), "the list is empty"));
  CHECK(contains(error_of("  - variable: A\n    values: [1, 1]\n    changes: x\n"), "'1' is listed twice"));
  CHECK(contains(error_of("  - variable: A\n    values: [1]\n"), "changes: missing"));
  CHECK(contains(error_of("  - variable: A\n    values: [1]\n    changes: x\n    changes_results: maybe\n"),
                 "changes_results: expected"));
  CHECK(contains(error_of("  - variable: A\n    values: [1]\n    changes: x\n    value: 2\n"),
                 at + ":5: try_knobs: unknown field 'value'"));
  CHECK(contains(error_of("  - variable: A\n    variable: B\n    values: [1]\n    changes: x\n"),
                 at + ":3: try_knobs: variable: set twice (first at line 2)"));
  CHECK(contains(error_of("  - variable: A\n    values: [1]\n    changes: [x, y]\n"),
                 at + ":4: try_knobs: changes: expected a few words"));
  CHECK(contains(error_of("  - variable: NVTX_INJECTION64_PATH\n    values: [1]\n    changes: x\n"), "iscope-run sets"));
  // A section with nothing under it declares nothing, and is no problem.
  cfg::ResolveOptions empty;
  empty.config_path = clean.dir.write("empty.yaml", "try_knobs:\ntrace_size_mb: 8\n");
  CHECK(cfg::resolve(empty).try_knobs.empty());
  CHECK(contains(error_of("  - variable: A\n    values: [1]\n    changes: x\n  - variable: A\n    values: [2]\n"
                          "    changes: y\n"),
                 at + ":5: try_knobs: A is declared twice (first at " + at + ":2)"));
}
