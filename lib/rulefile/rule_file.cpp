// Reading a rule file (rule_file.hpp): YAML through config::load_one_document, every key checked, every
// expression compiled, and every problem reported with its file, line and column.
#include "rulefile/rule_file.hpp"

#include "text/edit_distance.hpp"
#include "config/yaml_file.hpp"
#include "rulefile/expression_rule.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

namespace inferscope::rulefile {
namespace {

namespace rules = analyze::rules;

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}


// An expression as a message quotes it: at most 80 characters of it.
std::string shortened(const std::string& text) { return text.size() <= 80 ? text : text.substr(0, 77) + "..."; }

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

class Reader {
 public:
  Reader(std::string path, std::string source) : path_(std::move(path)), source_(std::move(source)) {}

  void read(const YAML::Node& root, rules::RuleSettings& out) {
    if (!root || root.IsNull()) return;  // empty: no rules, nothing changed
    if (!root.IsMap()) return problem(root, "expected the keys bottleneck_rules, builtin_rules and thresholds, got " +
                                                std::string(config::yaml_node_kind(root)));
    for (const auto& [key, value, key_node] : unique_entries(root)) {
      if (key == "bottleneck_rules") read_rules(value, out);
      else if (key == "builtin_rules") read_builtins(value, out);
      else if (key == "thresholds") read_thresholds(value, "", out);
      else unknown(key_node, "key '" + key + "'", key, {"bottleneck_rules", "builtin_rules", "thresholds"});
    }
  }
  std::vector<std::string> problems;

 private:
  std::string path_, source_;

  std::string at(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    return path_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  }
  void problem(const YAML::Node& n, const std::string& what) { problems.push_back(at(n) + ": " + what); }
  void unknown(const YAML::Node& n, const std::string& what, const std::string& typed, const std::vector<std::string>& known) {
    const std::vector<std::string> close = text::closest_names(typed, known);
    const std::string near = close.empty() ? std::string() : close.front();
    problem(n, "unknown " + what + (near.empty() ? "; known: " + list(known) : "; did you mean '" + near + "'?"));
  }

  // A map's entries by key, each key once: a key given twice, a key that is not a word, or a quote left open is a
  // problem (yaml-cpp keeps duplicates and swallows the rest of the file into an open quote).
  struct Entry {
    std::string key;
    YAML::Node value, key_node;
  };
  std::vector<Entry> unique_entries(const YAML::Node& map) {
    std::vector<Entry> out;
    std::map<std::string, int> first_line;
    for (const auto& entry : map) {
      if (open_quote(entry.first) || open_quote(entry.second)) continue;
      if (!entry.first.IsScalar()) {
        problem(entry.first, "a key must be a single word, got " + std::string(config::yaml_node_kind(entry.first)));
        continue;
      }
      const std::string key = entry.first.Scalar();
      if (auto [it, fresh] = first_line.emplace(key, entry.first.Mark().line + 1); !fresh) {
        problem(entry.first, key + ": set twice (first at line " + std::to_string(it->second) + ")");
        continue;
      }
      out.push_back({key, entry.second, entry.first});
    }
    return out;
  }
  bool open_quote(const YAML::Node& n) {
    if (!config::is_unterminated_quote(source_, n)) return false;
    problem(n, "YAML syntax error: a quoted string is never closed");
    return true;
  }

  std::optional<std::string> scalar(const YAML::Node& n, const std::string& key) {
    if (n.IsScalar()) return n.Scalar();
    problem(n, key + ": expected a single value, got " + std::string(config::yaml_node_kind(n)));
    return std::nullopt;
  }

  std::optional<double> number(const YAML::Node& n, const std::string& key) {
    auto text = scalar(n, key);
    if (!text) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text->c_str(), &end);
    if (text->empty() || end != text->c_str() + text->size() || !std::isfinite(v)) {
      problem(n, key + ": expected a number, got '" + *text + "'");
      return std::nullopt;
    }
    return v;
  }

  // An expression, compiled; a problem at the offending character when it does not compile.
  std::optional<Expression> expression(const YAML::Node& n, const std::string& key, const std::string& text) {
    try {
      return Expression::compile(text);
    } catch (const ExpressionError& e) {
      problem_in_scalar(n, e.offset(), key + ": " + e.what() + " (in `" + shortened(text) + "`)");
      return std::nullopt;
    }
  }
  // The problem's column is the character's in the file when the scalar is on one line, as written.
  void problem_in_scalar(const YAML::Node& n, size_t offset, const std::string& what) {
    const YAML::Mark m = n.Mark();
    size_t column = size_t(m.column);
    if (m.pos >= 0 && size_t(m.pos) < source_.size()) {
      const char first = source_[size_t(m.pos)];
      const size_t line_end = source_.find('\n', size_t(m.pos));
      const std::string_view raw = std::string_view(source_).substr(size_t(m.pos), line_end - size_t(m.pos));
      const bool quoted = first == '"' || first == '\'';
      const bool verbatim = raw.find(n.Scalar()) == (quoted ? 1 : 0);  // no escapes, no folding before the text
      if (verbatim) column += (quoted ? 1 : 0) + offset;
    }
    problems.push_back(path_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(column + 1) + ": " + what);
  }

  void read_rules(const YAML::Node& seq, rules::RuleSettings& out) {
    if (!seq.IsSequence()) return problem(seq, "bottleneck_rules: expected a list of rules ('- name: ...'), got " +
                                                   std::string(config::yaml_node_kind(seq)));
    std::map<std::string, int> names;
    const std::vector<std::string> builtins = rules::builtin_rule_names();
    for (const YAML::Node& item : seq) {
      auto spec = read_rule(item);
      if (!spec) continue;
      if (auto [it, fresh] = names.emplace(spec->name, item.Mark().line + 1); !fresh) {
        problem(item, "rule '" + spec->name + "': a second rule of that name (first at line " + std::to_string(it->second) + ")");
        continue;
      }
      if (std::find(builtins.begin(), builtins.end(), spec->name) != builtins.end()) {
        problem(item, "rule '" + spec->name + "': the name of a built-in rule; give yours another (builtin_rules: changes the built-in one)");
        continue;
      }
      out.custom.push_back(std::make_shared<ExpressionRule>(std::move(*spec)));
    }
  }

  std::optional<RuleSpec> read_rule(const YAML::Node& item) {
    if (!item.IsMap()) {
      problem(item, "a rule is a mapping (name:, condition:, suggestion:), got " + std::string(config::yaml_node_kind(item)));
      return std::nullopt;
    }
    const size_t before = problems.size();
    std::optional<std::string> name;
    std::optional<Expression> condition, impact;
    bool has_condition = false, has_name = false;
    RuleSpec spec{.name = "", .condition = Expression()};
    bool has_suggestion = false;
    for (const auto& [key, v, key_node] : unique_entries(item)) {
      if (key == "name") {
        has_name = true;
        name = scalar(v, key);
        if (name && !valid_name(*name)) {
          problem(v, "name: '" + *name + "': use letters, digits, '_', '-' and '.' (at most 64)");
          name.reset();
        }
      } else if (key == "condition") {
        has_condition = true;
        if (auto text = scalar(v, key)) condition = expression(v, key, *text);
        if (condition && !condition->compares()) {
          problem(v, "condition: `" + condition->text() + "` compares nothing; a condition is true or false, e.g. "
                     "`h2d_ms / step_ms > 0.3`");
          condition.reset();
        }
      } else if (key == "title") {
        if (auto text = scalar(v, key)) read_title(v, *text, spec);
      } else if (key == "impact_ms") {
        if (auto text = scalar(v, key)) impact = expression(v, key, *text);
      } else if (key == "confidence_weight") {
        if (auto w = number(v, key)) {
          if (*w <= 0 || *w > 10) problem(v, "confidence_weight: " + v.Scalar() + " is outside (0, 10]; 1 leaves the confidence as it is");
          else spec.confidence_weight = *w;
        }
      } else if (key == "suggestion" || key == "suggestions") {
        if (has_suggestion) problem(v, key + ": give suggestion or suggestions, not both");
        has_suggestion = true;
        read_suggestions(v, key, spec);
      } else {
        unknown(key_node, "rule key '" + key + "'", key, {"name", "condition", "title", "suggestion", "suggestions", "confidence_weight", "impact_ms"});
      }
    }
    std::vector<std::string> missing;
    if (!name && !has_name) missing.push_back("a name");
    if (!has_condition) missing.push_back("a condition");
    if (!has_suggestion) missing.push_back("a suggestion (what to do when it holds)");
    if (!missing.empty()) {
      std::string what = (name ? "rule '" + *name + "'" : std::string("a rule")) + " needs ";
      for (size_t i = 0; i < missing.size(); ++i) what += (i ? i + 1 == missing.size() ? " and " : ", " : "") + missing[i];
      problem(item, what);
    }
    if (problems.size() != before || !name || !condition) return std::nullopt;
    spec.name = *name;
    spec.condition = std::move(*condition);
    spec.impact_ms = std::move(impact);
    return spec;
  }

  static bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

  static bool valid_name(const std::string& s) {
    if (s.empty() || s.size() > 64) return false;
    return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; });
  }

  // Placeholders {expression}; "{{" and "}}" are literal braces.
  void read_title(const YAML::Node& v, const std::string& text, RuleSpec& spec) {
    spec.title = text;
    for (size_t i = 0; i < text.size(); ++i) {
      if ((text[i] == '{' || text[i] == '}') && i + 1 < text.size() && text[i + 1] == text[i]) {
        ++i;
        continue;
      }
      if (text[i] != '{') continue;
      const size_t close = text.find('}', i);
      if (close == std::string::npos) return problem_in_scalar(v, i, "title: a '{' without its '}'");
      try {
        spec.title_parts.push_back(Expression::compile(text.substr(i + 1, close - i - 1)));
      } catch (const ExpressionError& e) {
        problem_in_scalar(v, i + 1 + e.offset(), std::string("title: in {") + text.substr(i + 1, close - i - 1) + "}: " + e.what());
      }
      i = close;
    }
  }

  void read_suggestions(const YAML::Node& v, const std::string& key, RuleSpec& spec) {
    if (v.IsScalar()) {
      if (blank(v.Scalar())) return problem(v, key + ": empty; say what to do");
      return spec.suggestions.push_back({v.Scalar(), "medium", std::nullopt});
    }
    if (!v.IsSequence()) return problem(v, key + ": expected a sentence or a list of them, got " + std::string(config::yaml_node_kind(v)));
    for (const YAML::Node& s : v) {
      if (s.IsScalar()) {
        if (blank(s.Scalar())) problem(s, key + ": an empty suggestion; say what to do");
        else spec.suggestions.push_back({s.Scalar(), "medium", std::nullopt});
        continue;
      }
      if (!s.IsMap()) {
        problem(s, key + ": each is a sentence or a mapping (action:, priority:, saving_ms:)");
        continue;
      }
      RuleSuggestion out;
      for (const auto& [k, x, key_node] : unique_entries(s)) {
        if (k == "action") {
          if (auto t = scalar(x, k)) out.action = *t;
        } else if (k == "priority") {
          auto t = scalar(x, k);
          if (t && *t != "high" && *t != "medium" && *t != "low") problem(x, "priority: '" + *t + "'; allowed: high, medium, low");
          else if (t) out.priority = *t;
        } else if (k == "saving_ms") {
          if (auto t = scalar(x, k)) out.saving_ms = expression(x, k, *t);
        } else {
          unknown(key_node, "suggestion key '" + k + "'", k, {"action", "priority", "saving_ms"});
        }
      }
      if (blank(out.action)) problem(s, key + ": a suggestion needs an action: what to do");
      else spec.suggestions.push_back(std::move(out));
    }
    if (spec.suggestions.empty() && v.IsSequence()) problem(v, key + ": the list is empty");
  }

  void read_builtins(const YAML::Node& map, rules::RuleSettings& out) {
    if (!map.IsMap()) return problem(map, "builtin_rules: expected 'rule: off' or 'rule: {threshold: value}' lines, got " +
                                              std::string(config::yaml_node_kind(map)));
    const std::vector<std::string> builtins = rules::builtin_rule_names();
    for (const auto& [name, v, key_node] : unique_entries(map)) {
      if (std::find(builtins.begin(), builtins.end(), name) == builtins.end()) {
        unknown(key_node, "built-in rule '" + name + "'", name, builtins);
        continue;
      }
      if (v.IsScalar()) {
        if (auto on = switch_of(v, name)) {
          if (!*on) out.disabled.insert(name);
        }
        continue;
      }
      if (!v.IsMap()) {
        problem(v, name + ": expected off, on, or a mapping of thresholds (enabled: false to disable)");
        continue;
      }
      for (const auto& [k, x, key_node] : unique_entries(v)) {
        if (k == "enabled") {
          if (auto on = switch_of(x, name + ".enabled"); on && !*on) out.disabled.insert(name);
        } else {
          read_threshold(k, x, key_node, name, out);
        }
      }
    }
  }

  std::optional<bool> switch_of(const YAML::Node& v, const std::string& key) {
    static const std::map<std::string, bool> words = {{"on", true}, {"off", false}, {"true", true}, {"false", false},
                                                      {"yes", true}, {"no", false}, {"enabled", true}, {"disabled", false}};
    auto it = words.find(v.Scalar());
    if (it != words.end()) return it->second;
    problem(v, key + ": '" + v.Scalar() + "'; allowed: on, off (true, false, yes, no)");
    return std::nullopt;
  }

  void read_thresholds(const YAML::Node& map, const std::string& rule, rules::RuleSettings& out) {
    if (!map.IsMap()) return problem(map, "thresholds: expected 'name: value' lines, got " + std::string(config::yaml_node_kind(map)));
    for (const auto& [k, x, key_node] : unique_entries(map)) read_threshold(k, x, key_node, rule, out);
  }

  void read_threshold(const std::string& name, const YAML::Node& v, const YAML::Node& key_node, const std::string& rule,
                      rules::RuleSettings& out) {
    const rules::ThresholdDef* def = rules::find_threshold(name);
    if (!def) {
      std::vector<std::string> known;
      for (const rules::ThresholdDef& d : rules::threshold_table())
        if (rule.empty() || rules::reads_threshold(d, rule)) known.emplace_back(d.name);
      return unknown(key_node, "threshold '" + name + "'" + (rule.empty() ? "" : " of " + rule), name, known);
    }
    if (!rule.empty() && !rules::reads_threshold(*def, rule))
      return problem(key_node, rule + " does not read " + name + "; it is read by " + def->read_by);
    auto value = number(v, name);
    if (!value) return;
    const bool whole = !std::holds_alternative<double rules::Thresholds::*>(def->member);
    if (whole && *value != std::floor(*value)) return problem(v, name + ": " + v.Scalar() + " is not a whole number");
    if (*value < def->min || *value > def->max) {
      char range[96];
      std::snprintf(range, sizeof(range), "%g to %g", def->min, def->max);
      return problem(v, name + ": " + v.Scalar() + " is outside " + range + " (" + def->unit + ")");
    }
    out.thresholds[rule][name] = *value;
  }
};

}  // namespace

RuleFileError::RuleFileError(std::vector<std::string> problems)
    : std::runtime_error(join(problems)), problems_(std::move(problems)) {}

std::shared_ptr<const rules::RuleSettings> load_rule_file(const std::string& path) {
  std::string problem;
  const std::optional<std::string> text =
      config::read_small_file(path, "rule file '" + path + "'", kMaxRuleFileBytes, "a rule file holds a few rules (is it the right file?)", problem);
  if (!text) throw RuleFileError({problem});
  YAML::Node root;
  std::optional<YAML::Mark> second;
  try {
    root = config::load_one_document(*text, second);
  } catch (const YAML::ParserException& e) {
    throw RuleFileError({path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                         ": YAML syntax error: " + e.msg});
  } catch (const YAML::Exception& e) {
    throw RuleFileError({path + ": YAML error: " + e.what()});
  }
  if (second) throw RuleFileError({path + ":" + std::to_string(second->line + 1) + ": a rule file holds one YAML document; this is a second one"});
  auto settings = std::make_shared<rules::RuleSettings>();
  settings->source = path;
  Reader reader(path, *text);
  reader.read(root, *settings);
  if (!reader.problems.empty()) throw RuleFileError(reader.problems);
  return settings;
}

std::string find_rule_file(const std::string& explicit_path, std::string* named_by) {
  auto said = [&](const char* who) {
    if (named_by) *named_by = who;
  };
  if (!explicit_path.empty()) return said("--rules"), explicit_path;
  if (const char* env = std::getenv("INFERSCOPE_RULES"); env && *env) return said("INFERSCOPE_RULES"), env;
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(kDefaultRuleFile, ec))) {
    said("the working directory");
    const auto absolute = std::filesystem::absolute(kDefaultRuleFile, ec);
    return ec ? std::string(kDefaultRuleFile) : absolute.string();
  }
  return {};
}

std::shared_ptr<const rules::RuleSettings> rules_for_tool(const std::string& explicit_path, bool ignore) {
  if (ignore) return nullptr;
  std::string named_by;
  const std::string path = find_rule_file(explicit_path, &named_by);
  if (path.empty()) return nullptr;
  try {
    auto loaded = load_rule_file(path);
    auto named = std::make_shared<rules::RuleSettings>(*loaded);
    named->named_by = "named by " + named_by;
    return named;
  } catch (const RuleFileError& e) {
    std::vector<std::string> lines = {"the rule file " + path + " (named by " + named_by + ") cannot be used" +
                                      (named_by == "the working directory" ? " (--no-rules analyses without it)" : "") + ":"};
    for (const std::string& p : e.problems()) lines.push_back("  " + p);
    throw RuleFileError(std::move(lines));
  }
}

std::string describe(const rules::RuleSettings& s) {
  std::string out = std::to_string(s.custom.size()) + " rule" + (s.custom.size() == 1 ? "" : "s");
  for (size_t i = 0; i < s.custom.size(); ++i) out += (i ? ", " : ": ") + s.custom[i]->name();
  out += "\nbuilt-in rules disabled: ";
  if (s.disabled.empty()) out += "none";
  size_t i = 0;
  for (const std::string& d : s.disabled) out += (i++ ? ", " : "") + d;
  out += "\nthresholds changed: ";
  if (s.thresholds.empty()) out += "none";
  i = 0;
  for (const auto& [rule, values] : s.thresholds)
    for (const auto& [name, value] : values) {
      char v[64];
      std::snprintf(v, sizeof(v), "%g", value);
      out += (i++ ? ", " : "") + (rule.empty() ? std::string() : rule + ".") + name + " = " + v;
    }
  return out + "\n";
}

}  // namespace inferscope::rulefile
