// Reading a small YAML file the user wrote: the settings file (.inferscope.yaml) and the rule file
// (.inferscope_rules.yaml). Bounded (a size limit, never a FIFO or device), one document, and yaml-cpp 0.7's
// failure modes caught (a quote left open, a stray ',').
//
//   std::string problem;
//   auto text = config::read_small_file(path, "rule file 'r.yaml'", 1 << 20, "a rule file holds a few rules", problem);
//   std::optional<YAML::Mark> second;
//   YAML::Node root = config::load_one_document(*text, second);   // throws YAML::ParserException
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace inferscope::config {

/// "a mapping", "a sequence", "nothing", "a single value": for messages.
std::string_view yaml_node_kind(const YAML::Node& node);

/// A quoted scalar whose closing quote never comes: yaml-cpp 0.7 swallows the rest of the file into it.
bool is_unterminated_quote(const std::string& source, const YAML::Node& node);

/// "a directory", "a FIFO (named pipe)", ... for a file that is not a regular file.
const char* file_kind(mode_t mode);

/// The text of the regular file at `path`, at most `max_bytes`, or nullopt with `problem` naming it by `what`
/// ("config file 'x' (named by --config)"). Opened O_NONBLOCK, its kind taken from the open descriptor: a FIFO,
/// a device, a socket or a directory is refused without blocking, and a file over the limit (or /dev/zero) is
/// not read past it. `too_large_hint` ends the message for a file over the limit.
std::optional<std::string> read_small_file(const std::string& path, const std::string& what, size_t max_bytes,
                                           const char* too_large_hint, std::string& problem);

/// The source's one YAML document; a second one's root mark goes to `second` (the caller refuses it). Throws
/// YAML::ParserException, also for a ',' outside a collection, on which yaml-cpp 0.7's LoadAll never returns.
YAML::Node load_one_document(const std::string& source, std::optional<YAML::Mark>& second);

}  // namespace inferscope::config
