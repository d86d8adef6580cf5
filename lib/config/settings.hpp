// The settings model: resolves an effective inferscope::Config from defaults, .inferscope.yaml, the
// environment (INFERSCOPE_*) and command-line flags, in that order of increasing precedence.
//
// Every key is defined once, in the table in settings_table.cpp; the file, environment and flag parsers,
// `iscope-config show/validate/keys` and docs/configuration.md are all derived from it.
//
//   inferscope::config::ResolveOptions options;
//   options.flags = {{"trace_size_mb", "512"}};
//   auto resolved = inferscope::config::resolve(options);   // throws ConfigError listing every problem
//   resolved.origin.at("trace_size_mb");                     // "flag:--trace_size_mb"
#pragma once

#include <inferscope/config.hpp>

#include "config/declared_knobs.hpp"

#include <array>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscope::config {

/// A setting that could not be understood: names the file or variable, the line when known, the key, and
/// what is allowed. Holds every problem found, one per line in what(), so a user fixes them in one pass.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& message) : ConfigError(std::vector<std::string>{message}) {}
  explicit ConfigError(std::vector<std::string> errors);
  /// One message per problem; a single-element list when constructed from one message.
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

/// INFERSCOPE_* variables that are not settings: the config-file pointer and variables the runtime and
/// iscope-run set for themselves. Any other INFERSCOPE_* variable must name a setting, so a typo such as
/// INFERSCOPE_TRACE_SIZE is an error instead of being silently ignored. Extend this list when the runtime
/// starts using a new internal variable.
inline constexpr std::array kNonSettingEnvironment = {
    std::string_view("INFERSCOPE_CONFIG"),           // names the YAML file to read
    std::string_view("INFERSCOPE_RULES"),            // iscope-analyze, iscope-diff: names the rule file (docs/rules.md)
    std::string_view("INFERSCOPE_CLOCK"),            // runtime: forces the clock source (tests use monotonic)
    std::string_view("INFERSCOPE_CHILD"),            // set by iscope-run in processes it starts
    std::string_view("INFERSCOPE_ROOT_PID"),         // iscope-run: the pid of the process it started
    std::string_view("INFERSCOPE_EXEC_FROM"),        // runtime: the pid whose dump an exec'd image takes over
    std::string_view("INFERSCOPE_EXEC_EMPTY"),       // runtime: that dump holds nothing of the program (replaced)
    std::string_view("INFERSCOPE_LIVE_FD"),          // runtime: the live page's socket, handed over by exec
    std::string_view("INFERSCOPE_LIVE_TOKEN"),       // runtime: the live page's token, handed over by exec
    std::string_view("INFERSCOPE_INJECTED"),         // set once the CUPTI injection entry has run
    std::string_view("INFERSCOPE_ANALYZE"),          // runtime: iscope-analyze for the report at exit
    std::string_view("INFERSCOPE_ANALYZE_THREADS"),  // iscope-analyze: worker threads (default: the machine's)
    std::string_view("INFERSCOPE_ANALYZE_TIMING"),   // iscope-analyze: print the time of each phase
    std::string_view("INFERSCOPE_LIBRARY"),          // iscope-run: libinferscope.so to inject
    std::string_view("INFERSCOPE_PYTHON_DIR"),       // iscope-run: where inferscope_py and its sitecustomize live
    std::string_view("INFERSCOPE_CUPTI_LIBRARY"),    // GPU collector: libcupti.so to load
    std::string_view("INFERSCOPE_TRY"),              // iscope-run --try: the Python knobs tried (inferscope_py/_try.py)
};

/// The file looked for in the working directory when neither --config nor INFERSCOPE_CONFIG names one.
inline constexpr std::string_view kDefaultConfigFile = ".inferscope.yaml";

/// A boolean as every source spells one (settings, and tools' flags written with a value such as
/// `--follow-children=no`): true/false, yes/no, on/off, 1/0, in any case; nullopt for anything else.
std::optional<bool> parse_boolean(std::string_view text);
inline constexpr std::string_view kBooleanSpellings = "true/false, yes/no, on/off, 1/0";

/// A config file is a regular file of at most this many bytes (a few settings take a few hundred): anything
/// else named as one (a FIFO, /dev/zero, a directory, a huge file) is a problem naming it, never read.
inline constexpr size_t kMaxConfigFileBytes = size_t(1) << 20;

struct ResolveOptions {
  std::string config_path;  ///< --config; empty: INFERSCOPE_CONFIG, else ./.inferscope.yaml if present
  std::vector<std::pair<std::string, std::string>> flags;  ///< key -> value from the command line
  bool read_environment = true;
  bool read_file = true;
  /// How this tool spells a setting on its command line, "{key}" standing for the key and "{key-}" for the key
  /// with dashes for underscores; used in origins and error messages so that they show what the user typed
  /// (iscope-config uses "--set {key}", iscope-analyze "--{key-}": --skip-steps).
  std::string flag_spelling = "--{key}";
  /// What error messages call a flag: "flag --x: ..."; the Python binding's keywords say "start() keyword".
  std::string flag_noun = "flag";
  /// Problems in the file and the environment are collected in Resolved::ignored instead of thrown, their
  /// keys keeping their defaults (flags still throw). For tools that record nothing (iscope-analyze), whose
  /// run must not be stopped by a stale recording setting.
  bool lenient_sources = false;
  /// A Config a program set in code (inferscope::start): each field that differs from a default Config is
  /// taken from it, above the environment and the file (below flags), with the origin "code"; every field it
  /// left at its default comes from the other sources. Null: no code settings.
  const Config* code = nullptr;
};

/// Where an effective value came from: "default", "file:/path/.inferscope.yaml:12", "env:INFERSCOPE_X",
/// "code", "flag:--x". `origin` has an entry for every key.
struct Resolved {
  Config config;
  std::map<std::string, std::string> origin;  ///< key -> source description
  std::string config_file;                    ///< the YAML file that was read; empty when none
  std::vector<std::string> ignored;           ///< problems skipped under ResolveOptions::lenient_sources
  std::vector<DeclaredKnob> try_knobs;        ///< the file's `try_knobs` section: knobs for iscope-run --try
};

/// Resolves the effective configuration; throws ConfigError on any unknown key, wrong type or bad value.
/// Does not print and does not exit: the runtime calls it at process start.
Resolved resolve(const ResolveOptions& options = {});

/// Checks one YAML file on its own (no environment, no flags); throws ConfigError listing every problem.
void validate_file(const std::string& path);

/// One setting as users see it, for listings and documentation.
struct KeyInfo {
  std::string key;            ///< snake_case key, as in .inferscope.yaml
  std::string env;            ///< INFERSCOPE_<KEY>
  std::string section;        ///< session, sampled, cupti, python, system, analysis
  std::string type;           ///< boolean, integer, number, string, choice, list
  std::string default_value;  ///< the default, formatted as it would be written in the file
  std::string allowed;        ///< what values are accepted, in words
  std::string doc;            ///< what the setting does
};

/// Every setting, in the order of the fields of inferscope::Config.
const std::vector<KeyInfo>& keys();

/// The value of `key` in `config`, formatted as it would be written in the file; throws ConfigError for an
/// unknown key.
std::string value_text(const Config& config, std::string_view key);

/// `iscope-config show`: one line per key, "key: value  # source"; the output is itself a valid
/// .inferscope.yaml, so it can be saved and edited.
std::string format_show(const Resolved& resolved);
/// `iscope-config show --json`: {"config_file": ..., "settings": {"key": {"value": ..., "source": ...}}}.
std::string format_show_json(const Resolved& resolved);
/// `iscope-config keys --markdown`: the key reference table in docs/configuration.md.
std::string format_keys_markdown();
/// `iscope-config keys`: a plain listing of every key, its environment variable, default and allowed values.
std::string format_keys_text();

}  // namespace inferscope::config
