// Resolution of the effective configuration from its four sources. Every problem in every source is collected
// before throwing, so that one run of `iscope-config validate` (or one failed start) lists them all, and a
// process never starts with some settings applied and others ignored.
#include "config/settings.hpp"

#include "config/key_table.hpp"

#include <yaml-cpp/eventhandler.h>
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

std::string_view node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Null: return "nothing";
    default: return "a single value";
  }
}

// yaml-cpp 0.7 accepts a quoted scalar left open at the end of the file, silently swallowing every line after
// the quote into one string ("step: \"open" then "enable: true" becomes step = "open enable: true"). Re-scan
// the source from the node's opening quote to find its closing one.
bool is_unterminated_quote(const std::string& source, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (!node.IsScalar() || mark.pos < 0 || static_cast<size_t>(mark.pos) >= source.size()) return false;
  const char quote = source[mark.pos];
  if (quote != '"' && quote != '\'') return false;
  for (size_t i = mark.pos + 1; i < source.size(); ++i) {
    if (quote == '"' && source[i] == '\\') {
      ++i;  // an escaped character, possibly an escaped quote
    } else if (source[i] == quote) {
      if (quote == '\'' && i + 1 < source.size() && source[i + 1] == '\'') {
        ++i;  // '' is an escaped single quote
      } else {
        return false;
      }
    }
  }
  return true;
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
        problem = "a list item is " + std::string(node_kind(item)) + ", not a word";
        return false;
      }
      if (!text.empty()) text += ',';
      text += item.Scalar();
    }
    return true;
  }
  problem = "expected a single value, got " + std::string(node_kind(value));
  return false;
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The text of the config file at `path`, or nullopt after adding a problem naming it. Only a regular file of at
// most kMaxConfigFileBytes is read. A FIFO named by INFERSCOPE_CONFIG blocked every tool, and every program
// started with INFERSCOPE_ENABLE=1, until some writer came; /dev/zero was read until memory ran out (then
// std::bad_alloc ended the process); a directory read as an empty config. The file is opened O_NONBLOCK and its
// kind taken from the open descriptor, so no FIFO can block and nothing can be swapped in after the check.
std::optional<std::string> read_config_text(const std::string& path, const std::string& named_by, Problems& problems) {
  const std::string what = "config file '" + path + "'" + named_by;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    problems.messages.push_back("cannot read " + what + ": " + std::strerror(errno));
    return std::nullopt;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    ::close(fd);
    problems.messages.push_back(st.st_mode ? what + ": is " + kind_of(st.st_mode) + ", not a regular file (name a YAML file)"
                                           : "cannot read " + what + ": " + std::strerror(e));
    return std::nullopt;
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      problems.messages.push_back("cannot read " + what + ": " + std::strerror(e));
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxConfigFileBytes) {  // a file still growing is stopped here too
      ::close(fd);
      problems.messages.push_back(what + ": larger than " + std::to_string(kMaxConfigFileBytes >> 20) +
                                  " MiB; a config file holds a few settings (is it the right file?)");
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

// Records where each document starts and where its root node is; nothing else of the events is needed.
struct DocumentMarks : YAML::EventHandler {
  std::vector<YAML::Mark> starts, roots;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { root(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { root(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { root(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    root(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    root(mark);
  }
  void OnMapEnd() override {}

 private:
  void root(const YAML::Mark& mark) {
    if (roots.size() < starts.size()) roots.push_back(mark);
  }
};

// The file's one document; a second one is refused rather than ignored (its root's mark in `second`). Not
// YAML::LoadAll: yaml-cpp 0.7 never returns from it on a ',' outside a [ ] or { } collection (",", "- a\n,\n- b"),
// whose parser stops advancing while LoadAll adds an empty document per turn until memory runs out; fuzz_config
// found a 1-byte config file hanging every tool. So the documents are walked with the event parser, at most three,
// and one that starts where the one before it started is the syntax error it is. Throws YAML::ParserException.
YAML::Node load_one_document(const std::string& source, std::optional<YAML::Mark>& second) {
  std::istringstream in(source);
  YAML::Parser parser(in);
  DocumentMarks marks;
  while (marks.starts.size() < 3 && parser.HandleNextDocument(marks)) {
    const std::vector<YAML::Mark>& s = marks.starts;
    if (s.size() >= 2 && s[s.size() - 1].pos == s[s.size() - 2].pos) {
      const char c = static_cast<size_t>(s.back().pos) < source.size() ? source[s.back().pos] : ' ';
      throw YAML::ParserException(s.back(), std::string("unexpected '") + c + "'" +
                                                (c == ',' ? " (a comma separates items only inside [ ] or { })" : ""));
    }
  }
  if (marks.roots.size() > 1) second = marks.roots[1];
  return YAML::Load(source);
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
                                ": expected settings as 'key: value' lines, got " + std::string(node_kind(root)));
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
                                  std::string(node_kind(entry.first)));
      continue;
    }
    const std::string key = entry.first.Scalar();
    if (auto [it, inserted] = first_line.emplace(key, line); !inserted) {
      problems.messages.push_back(where + ": " + key + ": set twice (first at line " +
                                  std::to_string(it->second) + ")");
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

// Settings each valid on its own but not together. Only sampled mode reads these, so only it is checked: a full
// run is not refused for a window setting it never uses.
void check_combinations(const Resolved& resolved, Problems& problems) {
  const Config& c = resolved.config;
  if (c.mode != CaptureMode::kSampled) return;
  auto described = [&](std::string_view key, uint64_t value) {
    const std::string& origin = resolved.origin.at(std::string(key));
    return std::string(key) + " = " + std::to_string(value) + " (" + origin + ")";
  };
  auto smaller = [&](std::string_view window, uint64_t w, std::string_view every, uint64_t e) {
    if (w < e) return;
    problems.messages.push_back("mode: sampled: " + described(window, w) + " must be smaller than " +
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
