// A program's own settings that `iscope-run --try` may change (docs/try.md, "A program's own knobs"): environment
// variables the program reads, declared by whoever owns it in the settings file, under `try_knobs`. The settings
// reader checks the section and keeps what it declares in Resolved::try_knobs; iscope-run adds them to its
// catalogue. A C++ server's pool size or batch limit is such a knob: iscope-run cannot know the program reads it,
// so the file says so.
//
//   # .inferscope.yaml
//   try_knobs:
//     - variable: POOL_THREADS          # the environment variable the program reads
//       values: [1, 2, 4, 8]            # the values worth trying: a list, or a range of integers "1..64"
//       changes: threads of the request pool
//       changes_results: false          # optional (default false): whether it can change the program's output
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;  // yaml-cpp's: only the reader sees the YAML, not every user of the settings
}

namespace inferscope::config {

/// The settings file's key that holds the declarations (a section, not a setting).
inline constexpr std::string_view kTryKnobsKey = "try_knobs";

struct DeclaredKnob {
  std::string variable;              ///< the environment variable, as the program spells it
  std::vector<std::string> choices;  ///< the values it takes; empty when it takes a range of integers
  long low = 0, high = 0;            ///< that range, both ends included (when `choices` is empty)
  std::string changes;               ///< what it changes, in the owner's words
  bool changes_results = false;
  std::string where;                 ///< "path:line" of its declaration, for messages

  /// The value as the program gets it ("" when the declaration does not take `value`): a choice as written, an
  /// integer of the range as a plain decimal ("08" -> "8", "-3" stays "-3").
  std::string accepted(const std::string& value) const;
  /// "1, 2, 4 or 8", "an integer, 1 to 64": for messages and the catalogue.
  std::string values_text() const;
};

/// The declarations of one `try_knobs` section of the file at `path`; each problem (naming the file, the line and
/// the field) goes to `problems`, and a declaration with one is left out.
std::vector<DeclaredKnob> parse_declared_knobs(const YAML::Node& section, const std::string& path,
                                               std::vector<std::string>& problems);

}  // namespace inferscope::config
