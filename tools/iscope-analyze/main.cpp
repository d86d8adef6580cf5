// iscope-analyze: reads a dump and explains it. Exit status: 0 success (also for a dump cut short by a
// crash, with a warning), 1 unreadable input, 2 bad usage, 3 corrupt data (what could be read is shown).
#include "analyze/summary.hpp"
#include "dump/reader.hpp"

#include <cxxopts.hpp>

#include <iostream>

int main(int argc, char** argv) {
  cxxopts::Options opts("iscope-analyze", "Explains an InferScope dump: why each step takes the time it takes.");
  opts.add_options()("summary", "print what the dump holds: threads, ranges, marks, drops, clock quality")(
      "h,help", "show this help")("dump", "the dump file", cxxopts::value<std::string>());
  opts.parse_positional({"dump"});
  opts.positional_help("DUMP");
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n" << opts.help() << "\n";
    return 2;
  }
  if (args.count("help")) {
    std::cout << opts.help() << "\n";
    return 0;
  }
  if (!args.count("dump")) {
    std::cerr << "iscope-analyze: no dump given\n" << opts.help() << "\n";
    return 2;
  }
  const std::string path = args["dump"].as<std::string>();
  try {
    inferscope::dump::DumpReader reader(path);
    if (reader.damage()) std::cerr << "iscope-analyze: warning: " << reader.damage()->message << "\n";
    auto summary = inferscope::analyze::summarize(reader);
    inferscope::analyze::print_summary(reader, summary, std::cout);
    return reader.damage() && !reader.damage()->truncated ? 3 : 0;
  } catch (const inferscope::dump::DumpError& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n";
    return 1;
  }
}
