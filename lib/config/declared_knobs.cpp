// A program's own --try knobs, declared in the settings file (declared_knobs.hpp).
#include "config/declared_knobs.hpp"

#include "config/settings.hpp"
#include "config/yaml_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <string_view>

namespace inferscope::config {
namespace {

constexpr std::array kFields = {std::string_view("variable"), std::string_view("values"), std::string_view("changes"),
                                std::string_view("changes_results")};

// Variables iscope-run sets to record the program: a tried value would stop the recording, not tune the program.
constexpr std::array kRecorderVariables = {std::string_view("LD_PRELOAD"), std::string_view("LD_LIBRARY_PATH"),
                                           std::string_view("CUDA_INJECTION64_PATH"),
                                           std::string_view("NVTX_INJECTION64_PATH"), std::string_view("PYTHONPATH")};

std::string line_of(const std::string& path, const YAML::Node& node) {
  return path + ":" + std::to_string(node.Mark().line + 1);
}

bool is_variable_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// A decimal integer, the whole text (a leading '-' is its only sign), within a long.
bool parse_integer(std::string_view s, long& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

bool is_plain_value(const std::string& v) {
  return !v.empty() && v.size() <= 256 &&
         std::none_of(v.begin(), v.end(), [](unsigned char c) { return std::iscntrl(c); });
}

// `values`: a list of values, or "LOW..HIGH". False after adding a problem.
bool read_values(const YAML::Node& node, const std::string& where, DeclaredKnob& k, std::vector<std::string>& problems) {
  const std::string expected = ": values: expected a list of values ([1, 2, 4]) or a range of integers (\"1..64\")";
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (!item.IsScalar() || !is_plain_value(item.Scalar())) {
        problems.push_back(where + ": values: each value is one word or number of at most 256 characters");
        return false;
      }
      if (std::find(k.choices.begin(), k.choices.end(), item.Scalar()) != k.choices.end()) {
        problems.push_back(where + ": values: '" + item.Scalar() + "' is listed twice");
        return false;
      }
      k.choices.push_back(item.Scalar());
    }
    if (k.choices.empty()) problems.push_back(where + ": values: the list is empty; name the values worth trying");
    return !k.choices.empty();
  }
  if (!node.IsScalar()) {
    problems.push_back(where + expected + ", got " + std::string(yaml_node_kind(node)));
    return false;
  }
  const std::string& s = node.Scalar();
  const size_t dots = s.find("..");
  if (dots == std::string::npos || !parse_integer(s.substr(0, dots), k.low) ||
      !parse_integer(s.substr(dots + 2), k.high)) {
    problems.push_back(where + expected + ", got '" + s + "'");
    return false;
  }
  if (k.low > k.high) {
    problems.push_back(where + ": values: the range '" + s + "' runs backwards");
    return false;
  }
  return true;
}

// One declaration, or false after adding its problems.
bool read_one(const YAML::Node& item, const std::string& path, DeclaredKnob& k, std::vector<std::string>& problems) {
  auto at = [&](const YAML::Node& node) { return line_of(path, node) + ": " + std::string(kTryKnobsKey); };
  const std::string where = at(item);
  if (!item.IsMap()) {
    problems.push_back(where + ": each declaration is a mapping ('- variable: NAME' with values and changes), got " +
                       std::string(yaml_node_kind(item)));
    return false;
  }
  const size_t before = problems.size();
  std::map<std::string, int> seen;  // yaml-cpp keeps a repeated key; the first would win without a word
  for (const auto& field : item) {
    const std::string name = field.first.IsScalar() ? field.first.Scalar() : std::string();
    if (std::find(kFields.begin(), kFields.end(), name) == kFields.end())
      problems.push_back(at(field.first) + ": unknown field '" + name + "'; a declaration has variable, values, changes and "
                         "changes_results");
    else if (auto [it, inserted] = seen.emplace(name, field.first.Mark().line + 1); !inserted)
      problems.push_back(at(field.first) + ": " + name + ": set twice (first at line " + std::to_string(it->second) + ")");
  }
  const YAML::Node variable = item["variable"], values = item["values"], changes = item["changes"],
                   results = item["changes_results"];
  if (!variable) {
    problems.push_back(where + ": variable: missing; name the environment variable the program reads");
  } else if (!variable.IsScalar() || !is_variable_name(variable.Scalar())) {
    problems.push_back(at(variable) + ": variable: expected the name of an environment variable (letters, digits, _), got " +
                       (variable.IsScalar() ? "'" + variable.Scalar() + "'" : std::string(yaml_node_kind(variable))));
  } else {
    k.variable = variable.Scalar();
    const bool recorder = k.variable.rfind("INFERSCOPE_", 0) == 0 ||
                          std::find(kRecorderVariables.begin(), kRecorderVariables.end(), k.variable) !=
                              kRecorderVariables.end();
    if (recorder)
      problems.push_back(at(variable) + ": variable: " + k.variable +
                         " is one iscope-run sets to record the program; it cannot be a knob (InferScope's own settings "
                         "take --set)");
  }
  if (!values) problems.push_back(where + ": values: missing; list the values worth trying, or a range \"1..64\"");
  else read_values(values, at(values), k, problems);
  if (!changes)
    problems.push_back(where + ": changes: missing; say in a few words what the variable changes in the program");
  else if (!changes.IsScalar() || !is_plain_value(changes.Scalar()))
    problems.push_back(at(changes) + ": changes: expected a few words on one line (at most 256 characters), got " +
                       (changes.IsScalar() ? std::string("other text") : std::string(yaml_node_kind(changes))));
  else k.changes = changes.Scalar();
  if (results) {
    const std::optional<bool> b = results.IsScalar() ? parse_boolean(results.Scalar()) : std::nullopt;
    if (!b) problems.push_back(at(results) + ": changes_results: expected " + std::string(kBooleanSpellings));
    else k.changes_results = *b;
  }
  k.where = line_of(path, item);
  return problems.size() == before;
}

}  // namespace

std::string DeclaredKnob::accepted(const std::string& value) const {
  if (!choices.empty()) return std::find(choices.begin(), choices.end(), value) != choices.end() ? value : "";
  long v = 0;
  if (!parse_integer(value, v) || v < low || v > high) return "";
  return std::to_string(v);
}

std::string DeclaredKnob::values_text() const {
  if (choices.empty()) return "an integer, " + std::to_string(low) + " to " + std::to_string(high);
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i)
    s += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return s;
}

std::vector<DeclaredKnob> parse_declared_knobs(const YAML::Node& section, const std::string& path,
                                               std::vector<std::string>& problems) {
  std::vector<DeclaredKnob> out;
  if (section.IsNull()) return out;  // "try_knobs:" with nothing under it declares nothing
  if (!section.IsSequence()) {
    problems.push_back(line_of(path, section) + ": " + std::string(kTryKnobsKey) +
                       ": expected a list of declarations ('- variable: NAME'), got " + std::string(yaml_node_kind(section)));
    return out;
  }
  std::map<std::string, std::string> first;  // variable -> where it was declared
  for (const YAML::Node& item : section) {
    DeclaredKnob k;
    if (!read_one(item, path, k, problems)) continue;
    if (auto [it, inserted] = first.emplace(k.variable, k.where); !inserted) {
      problems.push_back(k.where + ": " + std::string(kTryKnobsKey) + ": " + k.variable + " is declared twice (first at " +
                         it->second + ")");
      continue;
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace inferscope::config
