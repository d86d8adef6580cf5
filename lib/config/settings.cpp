// Resolution of the effective configuration from its four sources. Every problem in every source is collected
// before throwing, so that one run of `iscope-config validate` (or one failed start) lists them all, and a
// process never starts with some settings applied and others ignored.
#include "config/settings.hpp"

#include "config/key_table.hpp"
#include "config/yaml_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <variant>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

extern char** environ;

namespace inferscope {

namespace config {
namespace {

using detail::KeyDef;

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

// Collects problems; `where` is "path:line", "environment variable X" or "flag --x".
struct Problems {
  std::vector<std::string> messages;

  void unknown_key(const std::string& where, std::string_view key) {
    std::string message = where + ": unknown key '" + std::string(key) + "'";
    std::string suggestion = detail::closest_key(key);
    message += suggestion.empty() ? "; `iscope-config keys` lists every key"
                                  : "; did you mean '" + suggestion + "'?";
    messages.push_back(std::move(message));
  }

  void bad_value(const std::string& where, const KeyDef& def, const std::string& problem) {
    messages.push_back(where + ": " + std::string(def.key) + ": " + problem + "; allowed: " + detail::allowed(def));
  }
};

// Applies one value from any source: the only place a source's text reaches the Config.
void apply(Resolved& resolved, Problems& problems, const KeyDef& def, std::string_view text,
           const std::string& where, std::string origin) {
  std::string problem = detail::assign(def, resolved.config, text);
  if (!problem.empty()) {
    problems.bad_value(where, def, problem);
    return;
  }
  resolved.origin[std::string(def.key)] = std::move(origin);
}

// The text of a setting's value node, or a problem. A list setting also accepts a YAML sequence of words.
bool value_text_of(const KeyDef& def, const YAML::Node& value, std::string& text, std::string& problem) {
  if (value.IsScalar()) {
    text = value.Scalar();
    return true;
  }
  if (value.IsNull()) {  // "key:" with nothing after it, or "~": empty text, which only strings accept
    text.clear();
    return true;
  }
  if (value.IsSequence() && def.list) {
    text.clear();
    for (const YAML::Node& item : value) {
      if (!item.IsScalar()) {
        problem = "a list item is " + std::string(yaml_node_kind(item)) + ", not a word";
        return false;
      }
      if (!text.empty()) text += ',';
      text += item.Scalar();
    }
    return true;
  }
  problem = "expected a single value, got " + std::string(yaml_node_kind(value));
  return false;
}


// The text of the config file at `path`, or nullopt after adding a problem naming it (config::read_small_file).
std::optional<std::string> read_config_text(const std::string& path, const std::string& named_by, Problems& problems) {
  std::string problem;
  std::optional<std::string> text = read_small_file(path, "config file '" + path + "'" + named_by, kMaxConfigFileBytes,
                                                    "a config file holds a few settings (is it the right file?)", problem);
  if (!text) problems.messages.push_back(std::move(problem));
  return text;
}

void read_file(const std::string& path, const std::string& named_by, Resolved& resolved, Problems& problems) {
  const std::optional<std::string> text = read_config_text(path, named_by, problems);
  if (!text) return;
  const std::string& source = *text;
  resolved.config_file = path;

  YAML::Node root;
  std::optional<YAML::Mark> second;
  try {
    root = load_one_document(source, second);
  } catch (const YAML::ParserException& e) {
    problems.messages.push_back(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                                std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
    return;
  } catch (const YAML::Exception& e) {
    problems.messages.push_back(path + ": YAML error: " + e.what());
    return;
  }
  // A second document ("---") would be ignored by a single-document read: refuse it rather than drop it.
  if (second) {
    problems.messages.push_back(path + ":" + std::to_string(second->line + 1) +
                                ": a config file holds one YAML document; this is a second one");
    return;
  }
  if (!root || root.IsNull()) return;  // an empty file (or only comments) sets nothing
  if (!root.IsMap()) {
    problems.messages.push_back(path + ":" + std::to_string(root.Mark().line + 1) +
                                ": expected settings as 'key: value' lines, got " + std::string(yaml_node_kind(root)));
    return;
  }

  std::map<std::string, int> first_line;  // yaml-cpp keeps duplicate keys; a second value is a mistake
  for (const auto& entry : root) {
    for (const YAML::Node& node : {entry.first, entry.second}) {
      if (is_unterminated_quote(source, node)) {
        problems.messages.push_back(path + ":" + std::to_string(node.Mark().line + 1) + ":" +
                                    std::to_string(node.Mark().column + 1) +
                                    ": YAML syntax error: a quoted string is never closed");
        return;
      }
    }
    const int line = entry.first.Mark().line + 1;
    const std::string where = path + ":" + std::to_string(line);
    if (!entry.first.IsScalar()) {
      problems.messages.push_back(where + ": a key must be a single word, got " +
                                  std::string(yaml_node_kind(entry.first)));
      continue;
    }
    const std::string key = entry.first.Scalar();
    if (auto [it, inserted] = first_line.emplace(key, line); !inserted) {
      problems.messages.push_back(where + ": " + key + ": set twice (first at line " +
                                  std::to_string(it->second) + ")");
      continue;
    }
    if (key == kTryKnobsKey) {  // a section for iscope-run --try, not a setting (declared_knobs.hpp)
      resolved.try_knobs = parse_declared_knobs(entry.second, path, problems.messages);
      continue;
    }
    const KeyDef* def = detail::find_key(key);
    if (!def) {
      problems.unknown_key(where, key);
      continue;
    }
    std::string text, problem;
    if (!value_text_of(*def, entry.second, text, problem)) {
      problems.bad_value(where, *def, problem);
      continue;
    }
    apply(resolved, problems, *def, text, where, "file:" + where);
  }
}

void read_environment(Resolved& resolved, Problems& problems) {
  constexpr std::string_view kPrefix = "INFERSCOPE_";
  std::vector<std::string_view> entries;
  for (char** e = environ; e && *e; ++e)
    if (std::string_view(*e).starts_with(kPrefix)) entries.emplace_back(*e);
  // environ's order is whatever the parent chose; sorting makes error lists reproducible.
  std::sort(entries.begin(), entries.end());

  for (std::string_view entry : entries) {
    const size_t eq = entry.find('=');
    const std::string name(entry.substr(0, eq));
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : entry.substr(eq + 1);
    if (std::find(kNonSettingEnvironment.begin(), kNonSettingEnvironment.end(), name) !=
        kNonSettingEnvironment.end())
      continue;

    std::string key = name.substr(kPrefix.size());
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    const KeyDef* def = detail::find_key(key);
    const std::string where = "environment variable " + name;
    // Only the upper-case spelling is a setting: INFERSCOPE_trace_size_mb is a typo, not an alias.
    if (!def || detail::env_name(def->key) != name) {
      std::string suggestion = def ? std::string(def->key) : detail::closest_key(key);
      std::string message = where + ": not an InferScope setting";
      message += suggestion.empty() ? "; `iscope-config keys` lists every variable"
                                    : "; did you mean " + detail::env_name(suggestion) + "?";
      problems.messages.push_back(std::move(message));
      continue;
    }
    apply(resolved, problems, *def, value, where, "env:" + name);
  }
}

std::string spell_flag(const std::string& spelling, std::string_view key) {
  std::string out = spelling;
  if (size_t at = out.find("{key}"); at != std::string::npos) out.replace(at, 5, key);
  if (size_t at = out.find("{key-}"); at != std::string::npos) {  // as a command line spells it: skip-steps
    std::string dashed(key);
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    out.replace(at, 6, dashed);
  }
  return out;
}

// --config, then INFERSCOPE_CONFIG, then ./.inferscope.yaml when present. A file that was named explicitly
// must exist; the working directory's file is optional. `named_by` says who named it, for error messages.
std::string pick_config_file(const ResolveOptions& options, std::string& named_by) {
  if (!options.config_path.empty()) {
    named_by = " (named by --config)";
    return options.config_path;
  }
  if (options.read_environment) {
    const char* from_env = std::getenv("INFERSCOPE_CONFIG");
    if (from_env && *from_env) {
      named_by = " (named by INFERSCOPE_CONFIG)";
      return from_env;
    }
  }
  std::error_code ec;
  if (std::filesystem::is_regular_file(kDefaultConfigFile, ec)) {
    auto absolute = std::filesystem::absolute(kDefaultConfigFile, ec);
    return ec ? std::string(kDefaultConfigFile) : absolute.string();
  }
  return {};
}

// buffer_mode says how full capture writes: a stream as it fills, or a flight recorder (the newest records in full
// detail). Given with `mode` left at its default (adaptive, whose windows are a ring of their own), it asks for
// full capture, as it did before adaptive became the default; a mode that was set is kept (sampled and adaptive
// ignore buffer_mode).
void resolve_mode_for_buffer_mode(Resolved& resolved) {
  if (resolved.origin.at("buffer_mode") == "default" && resolved.config.buffer_mode != BufferMode::kRing) return;
  if (resolved.origin.at("mode") != "default") return;
  resolved.config.mode = CaptureMode::kFull;
  resolved.origin["mode"] = "default, full because buffer_mode is set";
}

// Settings each valid on its own but not together. Only sampled mode reads these, so only it is checked: a full
// run is not refused for a window setting it never uses.
void check_combinations(const Resolved& resolved, Problems& problems) {
  const Config& c = resolved.config;
  if (!records_in_windows(c.mode)) return;
  auto described = [&](std::string_view key, uint64_t value) {
    const std::string& origin = resolved.origin.at(std::string(key));
    return std::string(key) + " = " + std::to_string(value) + " (" + origin + ")";
  };
  auto smaller = [&](std::string_view window, uint64_t w, std::string_view every, uint64_t e) {
    if (w < e) return;
    problems.messages.push_back(std::string("mode: ") + (c.mode == CaptureMode::kAdaptive ? "adaptive" : "sampled") +
                                ": " + described(window, w) + " must be smaller than " +
                                described(every, e) + ": a window would last until the next one begins, which is "
                                "full capture (use mode: full for that)");
  };
  smaller("window_steps", c.window_steps, "window_every_steps", c.window_every_steps);
  smaller("window_ms", c.window_ms, "window_every_ms", c.window_every_ms);
}

// The fields a program set in code: those that differ from a default Config. They win over the environment and
// the file, which still set every field the code left alone (issue 25, item 9).
void apply_code(const Config& code, Resolved& resolved) {
  const Config defaults;
  for (const KeyDef& def : detail::key_defs()) {
    std::visit(
        [&](auto member) {
          if (code.*member == defaults.*member) return;
          resolved.config.*member = code.*member;
          resolved.origin[std::string(def.key)] = "code";
        },
        def.member);
  }
}

Resolved defaults() {
  Resolved resolved;
  for (const KeyDef& def : detail::key_defs()) resolved.origin[std::string(def.key)] = "default";
  return resolved;
}

}  // namespace

ConfigError::ConfigError(std::vector<std::string> errors)
    : std::runtime_error(join_lines(errors)), errors_(std::move(errors)) {}

Resolved resolve(const ResolveOptions& options) {
  Resolved resolved = defaults();
  Problems problems, source_problems;
  Problems& from_sources = options.lenient_sources ? source_problems : problems;
  if (options.read_file) {
    std::string named_by;
    std::string path = pick_config_file(options, named_by);
    if (!path.empty()) read_file(path, named_by, resolved, from_sources);
  }
  if (options.read_environment) read_environment(resolved, from_sources);
  resolved.ignored = std::move(source_problems.messages);
  if (options.code) apply_code(*options.code, resolved);
  for (const auto& [key, value] : options.flags) {
    const std::string flag = spell_flag(options.flag_spelling, key);
    const KeyDef* def = detail::find_key(key);
    const std::string where = options.flag_noun + " " + flag;
    if (!def) {
      problems.unknown_key(where, key);
      continue;
    }
    apply(resolved, problems, *def, value, where, "flag:" + flag);
  }
  resolve_mode_for_buffer_mode(resolved);
  {
    Problems combined;
    check_combinations(resolved, combined);
    // A lenient tool records nothing, so a combination it cannot use is noted, not refused.
    auto& to = options.lenient_sources ? resolved.ignored : problems.messages;
    to.insert(to.end(), combined.messages.begin(), combined.messages.end());
  }
  if (!problems.messages.empty()) throw ConfigError(std::move(problems.messages));
  return resolved;
}

void validate_file(const std::string& path) {
  Resolved resolved = defaults();
  Problems problems;
  read_file(path, "", resolved, problems);
  if (problems.messages.empty()) check_combinations(resolved, problems);
  if (!problems.messages.empty()) throw ConfigError(std::move(problems.messages));
}

const std::vector<KeyInfo>& keys() {
  static const std::vector<KeyInfo> infos = [] {
    std::vector<KeyInfo> out;
    const Config defaults;
    for (const KeyDef& def : detail::key_defs())
      out.push_back({std::string(def.key), detail::env_name(def.key), std::string(def.section),
                     std::string(detail::type_name(def)), detail::format(def, defaults), detail::allowed(def),
                     std::string(def.doc)});
    return out;
  }();
  return infos;
}

std::string value_text(const Config& config, std::string_view key) {
  const KeyDef* def = detail::find_key(key);
  if (!def) throw ConfigError("unknown key '" + std::string(key) + "'");
  return detail::format(*def, config);
}

}  // namespace config
}  // namespace inferscope
