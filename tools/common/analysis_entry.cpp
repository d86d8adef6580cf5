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
  auto analyse_first = [&](const analyze::AnalyzeOptions& o) {
    return in.reader ? analyze::analyze_dump(*in.reader, o) : analyze::analyze_file(path, o);
  };
  analyze::AnalyzeOptions o = in.options;
  o.with_its_run = in.paths.size() > 1;  // the ranks named together: each is analysed with its run
  analyze::Analysis a = analyse_first(o);
  if (a.events == 0) return a;
  if (in.paths.size() > 1) {
    a.children = analyze::analyze_rank_dumps(in.paths, o, a.run);
    analyze::mark_launcher(a);  // the launcher's dump named with its ranks
  } else if (in.children && analyze::input_format(path) == analyze::InputFormat::kDump) {
    a.children = analyze::find_children(path, a, o, &a.run);
    if (a.run.ranks.size() >= 2 && a.gpu_work_recorded) {
      // A rank whose children are the other ranks (a Python parent that trains too): only now is it known to be
      // analysed with its run, so it is analysed again knowing it; its children and run stay as read.
      o.with_its_run = true;
      analyze::Analysis again = analyse_first(o);
      again.children = std::move(a.children);
      again.run = std::move(a.run);
      a = std::move(again);
    }
    analyze::mark_launcher(a);
  }
  a.rule_file = rule_file_line(in.options.rules.get());
  return a;
}

}  // namespace inferscope::tools
