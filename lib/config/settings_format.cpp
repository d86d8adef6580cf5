// Text renderings of the settings for iscope-config and the docs. They live in the library, not the tool, so
// tests and other tools print exactly what `iscope-config` prints.
#include "config/settings.hpp"

#include "config/key_table.hpp"

#include <algorithm>
#include <cstdio>

namespace inferscope::config {
namespace {

using detail::KeyDef;

// A double-quoted string valid both as JSON and as YAML (YAML's double-quoted style is a superset of JSON's).
std::string quote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Strings are quoted so that any text (empty, "yes", "1", "a: b") reads back as the same string.
std::string typed_value(const KeyDef& def, const Config& config) {
  std::string text = detail::format(def, config);
  return detail::is_string(def) ? quote(text) : text;
}

// "file:/p/.inferscope.yaml:3" -> "file /p/.inferscope.yaml:3": the kind, then where.
std::string readable_origin(const std::string& origin) {
  std::string out = origin;
  if (size_t colon = out.find(':'); colon != std::string::npos) out[colon] = ' ';
  return out;
}

std::string origin_of(const Resolved& resolved, std::string_view key) {
  auto it = resolved.origin.find(std::string(key));
  return it == resolved.origin.end() ? "default" : it->second;
}

std::string_view section_title(std::string_view section) {
  if (section == "session") return "Session";
  if (section == "sampled") return "Sampled mode";
  if (section == "live") return "Live page and metrics";
  if (section == "cupti") return "GPU collector (CUPTI)";
  if (section == "python") return "Python collector";
  if (section == "system") return "System collector";
  if (section == "analysis") return "Reports and analyzer";
  return section;
}

std::string markdown_cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string format_show(const Resolved& resolved) {
  size_t width = 0;
  std::vector<std::string> lines;
  for (const KeyDef& def : detail::key_defs()) {
    lines.push_back(std::string(def.key) + ": " + typed_value(def, resolved.config));
    width = std::max(width, lines.back().size());
  }
  std::string out = "# InferScope effective settings (precedence: flag > environment > file > default)\n";
  out += "# config file: " + (resolved.config_file.empty() ? std::string("none") : resolved.config_file) + "\n";
  size_t i = 0;
  for (const KeyDef& def : detail::key_defs()) {
    std::string& line = lines[i++];
    line.resize(width, ' ');
    out += line + "  # " + readable_origin(origin_of(resolved, def.key)) + "\n";
  }
  return out;
}

std::string format_show_json(const Resolved& resolved) {
  std::string out = "{\n  \"config_file\": ";
  out += resolved.config_file.empty() ? "null" : quote(resolved.config_file);
  out += ",\n  \"settings\": {\n";
  bool first = true;
  for (const KeyDef& def : detail::key_defs()) {
    if (!first) out += ",\n";
    first = false;
    const std::string_view type = detail::type_name(def);
    const std::string text = detail::format(def, resolved.config);
    const bool bare = type == "boolean" || type == "integer" || type == "number";
    out += "    " + quote(def.key) + ": {\"value\": " + (bare ? text : quote(text)) +
           ", \"source\": " + quote(origin_of(resolved, def.key)) + "}";
  }
  return out + "\n  }\n}\n";
}

std::string format_keys_markdown() {
  std::string out;
  std::string_view section;
  for (const KeyInfo& info : keys()) {
    if (info.section != section) {
      section = info.section;
      if (!out.empty()) out += "\n";
      out += "### " + std::string(section_title(section)) + "\n\n";
      out += "| Key | Environment variable | Type | Default | Allowed values | Description |\n";
      out += "| --- | --- | --- | --- | --- | --- |\n";
    }
    const bool is_text = info.type == "string" || info.type == "list";
    const std::string shown_default = is_text ? quote(info.default_value) : info.default_value;
    out += "| `" + info.key + "` | `" + info.env + "` | " + info.type + " | `" + markdown_cell(shown_default) +
           "` | " + markdown_cell(info.allowed) + " | " + markdown_cell(info.doc) + " |\n";
  }
  return out;
}

std::string format_keys_text() {
  std::string out;
  for (const KeyInfo& info : keys()) {
    out += info.key + "  (" + info.env + ")  " + info.type + ", default " +
           (info.default_value.empty() ? std::string("\"\"") : info.default_value) + "\n";
    out += "    allowed: " + info.allowed + "\n";
    out += "    " + info.doc + "\n";
  }
  return out;
}

}  // namespace inferscope::config
