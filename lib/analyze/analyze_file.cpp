// The analyzer's entry point for a file of any format: lib/import opens it (a dump from its file, a JSON trace
// imported into records in memory) and the analyzer reads the records whatever their origin.
#include "analyze/analyzer.hpp"

#include "import/import.hpp"

namespace inferscope::analyze {

Analysis analyze_file(const std::string& path, const AnalyzeOptions& opt) {
  const import::Input in = import::open_input(path);
  Analysis a = analyze_dump(*in.reader, opt);
  if (in.format == import::InputFormat::kDump) return a;
  a.source_format = in.reader->process_value("source_format");  // "json", or "kineto"/"perfetto" for Chrome traces
  std::vector<std::string> imported;
  for (const auto& w : in.warnings) imported.push_back(import::message(w, path));
  a.warnings.insert(a.warnings.begin(), imported.begin(), imported.end());
  return a;
}

}  // namespace inferscope::analyze
