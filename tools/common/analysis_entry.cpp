// The one analysis the analysing tools run (analysis_entry.hpp).
#include "analysis_entry.hpp"

#include "analyze/children.hpp"
#include "analyze/run/ranks.hpp"
#include "analyze/rules/rule_settings.hpp"
#include "rulefile/rule_file.hpp"

namespace inferscope::tools {

std::string rule_file_line(const analyze::rules::RuleSettings* s) {
  if (!s) return "";
  std::string d = rulefile::describe(*s);
  for (size_t at = d.find('\n'); at != std::string::npos; at = d.find('\n', at)) d.replace(at, 1, at + 1 == d.size() ? "" : "; ");
  return s->source + " (" + s->named_by + "): " + d;
}

analyze::Analysis analyze_inputs(const AnalysisInputs& in) {
  const std::string& path = in.paths.front();
  analyze::Analysis a = in.reader ? analyze::analyze_dump(*in.reader, in.options) : analyze::analyze_file(path, in.options);
  if (a.events == 0) return a;
  if (in.paths.size() > 1) {
    a.children = analyze::analyze_rank_dumps(in.paths, in.options, a.run);
    analyze::mark_launcher(a);  // the launcher's dump named with its ranks
  } else if (in.children && analyze::input_format(path) == analyze::InputFormat::kDump) {
    a.children = analyze::find_children(path, a, in.options, &a.run);
    analyze::mark_launcher(a);
  }
  a.rule_file = rule_file_line(in.options.rules.get());
  return a;
}

}  // namespace inferscope::tools
