// The knobs `iscope-run --try KNOB=VALUE` can change without editing the program (docs/try.md): the catalogue,
// each knob's values, what it changes, whether it can change results, and what the program must show for it to
// apply. Pure: no process is run here.
//
//   std::string error;
//   std::optional<TriedKnob> k = parse_try("num_workers=4", resolved.try_knobs, error);  // nullopt: error says why
//   std::string why = refusal(*k, facts);                                // "" when it applies to this program
#pragma once

#include "config/declared_knobs.hpp"

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace iscope_run {

/// How a knob reaches the program: an environment variable iscope-run sets (one it knows, or one the program's
/// settings file declares), or the Python side of --try (inferscope_py/_try.py, at the DataLoader's construction or
/// once torch is imported).
enum class KnobWay { kEnvironment, kDeclared, kPython };

struct Knob {
  std::string name;     ///< as typed: num_workers, allow_tf32, PYTORCH_CUDA_ALLOC_CONF, a declared variable
  KnobWay way = KnobWay::kEnvironment;
  std::string values;   ///< what VALUE may be, in words
  std::string changes;  ///< what it changes in the program
  bool changes_results = false;  ///< it can change the program's numbers (precision), not only its speed
  /// The program facts (lib/analyze/program_facts.hpp) the baseline run must show for the knob to apply.
  std::vector<std::string> needs;
  std::string applies_to;  ///< those facts in words, for the refusal
  /// A declared knob's declaration (way kDeclared): the values it takes and where it was declared.
  std::optional<inferscope::config::DeclaredKnob> declared;
};

/// Every knob iscope-run knows, in the order docs/try.md lists them.
const std::vector<Knob>& knob_catalogue();

/// A knob for each variable the program's settings file declares (`try_knobs`, config/declared_knobs.hpp).
Knob declared_knob(const inferscope::config::DeclaredKnob& d);

/// A declaration that takes a name iscope-run already knows as a knob ("" when none does): it is refused, since
/// the two would mean different things by one name.
std::string declaration_clash(const inferscope::config::DeclaredKnob& d);

/// One --try: the knob and its value as the program will get it.
struct TriedKnob {
  Knob knob;
  std::string value;
};

/// "KNOB=VALUE": the knob by name (case-sensitive, as the variable or the argument is spelled), among those
/// iscope-run knows and those the settings file declares, and a value it accepts. nullopt with `error` naming the
/// knob or the value and what is accepted.
std::optional<TriedKnob> parse_try(const std::string& spec, const std::vector<inferscope::config::DeclaredKnob>& declared,
                                   std::string& error);

/// Why `k` does not apply to a program whose baseline run showed `facts` ("" when it applies).
std::string refusal(const TriedKnob& k, const std::set<std::string>& facts);

/// The environment the tried run gets on top of the baseline's: the environment knobs' variables, and the Python
/// knobs joined in INFERSCOPE_TRY ("num_workers=4;allow_tf32=true") for inferscope_py/_try.py.
std::vector<std::pair<std::string, std::string>> tried_environment(const std::vector<TriedKnob>& knobs);

/// "num_workers=4 allow_tf32=true", as the user typed them (for the result's heading and the report).
std::string describe(const std::vector<TriedKnob>& knobs);

}  // namespace iscope_run
