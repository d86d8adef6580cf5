// The one table of settings (internal to lib/config): each row binds a key to a Config member and its
// constraints; parsing, formatting and the description of allowed values are generic over the member's type.
#pragma once

#include <inferscope/config.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace inferscope::config::detail {

using Member = std::variant<bool Config::*, uint32_t Config::*, uint64_t Config::*, double Config::*,
                            std::string Config::*, BufferMode Config::*, LogLevel Config::*, CaptureMode Config::*>;

/// Checks a string value beyond its type; returns the problem in words, or "" when the value is fine.
using StringCheck = std::string (*)(std::string_view value);

struct KeyDef {
  std::string_view key;
  std::string_view section;
  Member member;
  std::string_view doc;
  // Inclusive range for integer and number members. Integer limits are below 2^53, so double holds them
  // exactly.
  double min = 0;
  double max = 0;
  bool power_of_two = false;
  /// For string members: the only accepted values (empty: any text, subject to `check`).
  std::span<const std::string_view> choices = {};
  /// For string members holding a comma-separated list: a YAML sequence is accepted and joined with ",".
  bool list = false;
  StringCheck check = nullptr;
  /// Words for `allowed` when `check` is set (the check itself cannot describe what it accepts).
  std::string_view check_allowed = {};
};

std::span<const KeyDef> key_defs();
const KeyDef* find_key(std::string_view key);

/// Parses `text` into the member of `config`; returns the problem in words ("'abc' is not an integer"),
/// or "" on success, leaving `config` unchanged on failure.
std::string assign(const KeyDef& def, Config& config, std::string_view text);
/// The member's value, written as it would be in .inferscope.yaml (strings unquoted).
std::string format(const KeyDef& def, const Config& config);
/// The accepted values in words: "an integer in [1, 65536]", "one of: stream, ring", ...
std::string allowed(const KeyDef& def);
/// boolean, integer, number, string, choice or list.
std::string_view type_name(const KeyDef& def);
bool is_string(const KeyDef& def);

/// INFERSCOPE_ plus the upper-case key.
std::string env_name(std::string_view key);
/// The known key closest to a misspelt one, or "" when none is close enough to be a useful suggestion.
std::string closest_key(std::string_view unknown);

}  // namespace inferscope::config::detail
