// iscope-diff: compares two runs of one program (a dump, a JSON event trace or a torch.profiler trace each)
// and says what changed: the steady step latency with an interval, the breakdown, the findings, the kernels
// and Python functions that changed most.
//
//   iscope-diff BEFORE AFTER                       Markdown on stdout
//   iscope-diff BEFORE AFTER -o diff.md|.html|.json [--md F] [--html F] [--json F] [--step NAME] [--skip-steps N|auto]
//
// Exit status: 0 the comparison was written, 1 an unreadable input (named) or an output that could not be
// written, 2 bad usage, 3 the two runs look unrelated (nothing written), 4 the comparison was written but an
// input was corrupt or cut short (only what could be read was compared; a note names it). docs/cli.md lists every
// tool's exit statuses.
#include "analyze/analyzer.hpp"
#include "config/settings.hpp"
#include "dump/files.hpp"
#include "dump/path.hpp"
#include "report/diff.hpp"
#include "rulefile/rule_file.hpp"

#include "output_rule.hpp"
#include "analysis_entry.hpp"
#include "tool_options.hpp"

#include <cxxopts.hpp>
#include <inferscope/version.hpp>

#include <iostream>
#include <optional>

namespace {

using inferscope::analyze::Analysis;
constexpr const char* kTool = "iscope-diff";

// The format -o writes, from the file name ("-" is Markdown on stdout); empty for an extension it does not
// know, which is refused rather than guessed at.
std::string output_format(const std::string& p) {
  if (p == "-") return "md";
  std::string e = inferscope::dump::split_extension(p).ext;
  for (auto& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (e == ".md") return "md";
  if (e == ".html" || e == ".htm") return "html";
  if (e == ".json") return "json";
  return "";
}

// Through a temporary renamed into place: a write that fails half-way leaves the previous file as it was.
bool write_to(const std::string& path, const std::string& fmt, const inferscope::report::Comparison& c) {
  auto write = [&](std::ostream& s) {
    if (fmt == "html") inferscope::report::write_diff_html(c, s);
    else if (fmt == "json") inferscope::report::write_diff_json(c, s);
    else inferscope::report::write_diff_markdown(c, s);
  };
  if (path == "-") {
    write(std::cout);
    return true;
  }
  inferscope::dump::AtomicOutput out(path);
  if (out.ok()) write(out.stream());
  if (!out.commit()) {
    std::cerr << kTool << ": " << out.error() << "\n";
    return false;
  }
  return true;
}

// One run's analysis; nullopt (after naming the file and the reason) when it cannot be read. `bad_usage` is set
// when the reason is the command's (a --step that names nothing in the file: exit 2, as iscope-analyze).
std::optional<Analysis> analyse(const std::string& path, const inferscope::analyze::AnalyzeOptions& o, bool& bad_usage) {
  try {
    // The analysis iscope-analyze makes of the same dump (analysis_entry.hpp): its children and the run across its
    // ranks read, a launcher's headline the run's step, so the two tools describe one dump alike.
    Analysis a = inferscope::tools::analyze_inputs({{path}, /*children=*/true, o, nullptr});
    for (const auto& w : a.warnings) std::cerr << kTool << ": warning: " << path << ": " << w << "\n";
    if (const std::string why = inferscope::tools::nothing_to_analyse(a, path); !why.empty()) {
      std::cerr << kTool << ": " << why << "\n";
      return std::nullopt;
    }
    return a;
  } catch (const inferscope::analyze::UnknownStep& e) {
    std::cerr << kTool << ": " << e.what() << "\n";
    bad_usage = true;
  } catch (const inferscope::dump::DumpError& e) {
    std::cerr << kTool << ": " << e.what() << "\n";
  } catch (const inferscope::analyze::InputError& e) {
    std::cerr << kTool << ": " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << kTool << ": " << inferscope::analyze::out_of_memory_message(path) << "\n";
  }
  return std::nullopt;
}

// Read to its end: neither corrupt nor cut short (a dump without its END chunk). A comparison with a run that is
// not whole is written with a note naming it, and exits 4.
bool whole(const Analysis& a) { return !a.partial && a.complete; }

// One named output checked by the rule every output of the analysing tools follows (output_rule.hpp): 0, or exit
// status 2 after saying why. `inputs`: BEFORE and AFTER, and the child dumps beside each (an output over one
// replaced a recorded process's dump).
int check_output(const std::string& flag, const std::string& p, const std::vector<inferscope::tools::InputFile>& inputs) {
  const std::string why = inferscope::tools::output_problem({flag, p}, inputs, "-o, --md, --html, --json");
  if (why.empty()) return 0;
  std::cerr << kTool << ": " << why << "\n";
  return 2;
}

// -o values (the extension picks the format), then --md, --html, --json (the flag does), as (format, path); exit
// status 2 (after saying why) for an unknown extension or an output check_output refuses.
int parse_outputs(const cxxopts::ParseResult& args, const std::vector<std::string>& named_inputs,
                  std::vector<std::pair<std::string, std::string>>& outputs) {
  const std::vector<inferscope::tools::InputFile> inputs = inferscope::tools::files_read(named_inputs);
  if (args.count("output"))
    for (const auto& p : args["output"].as<std::vector<std::string>>()) {
      if (int rc = check_output("-o", p, inputs)) return rc;
      const std::string fmt = output_format(p);
      if (fmt.empty()) {
        std::cerr << kTool << ": -o " << p << ": unknown extension (the extension picks the format); use .md, "
                  << ".html, .htm, .json, or - for Markdown on stdout, or name the format with --md, --html, --json\n";
        return 2;
      }
      outputs.emplace_back(fmt, p);
    }
  for (const auto& [fmt, p] : inferscope::tools::report_file_flags(args)) {
    if (int rc = check_output("--" + fmt, p, inputs)) return rc;
    outputs.emplace_back(fmt, p);
  }
  if (outputs.empty()) outputs.emplace_back("md", "-");
  return 0;
}

cxxopts::Options make_options() {
  cxxopts::Options opts(kTool, "Compares two runs of one program (dumps, JSON event traces or torch.profiler traces): "
                               "what changed in the step latency, the breakdown, the findings, the kernels and the "
                               "Python functions.");
  opts.add_options()
      ("o,output", "comparison file; the format follows the extension: .md, .html, .json, or - (Markdown on "
                   "stdout); repeatable", cxxopts::value<std::vector<std::string>>())
      ("step", "the step range, scope or Python function, in both runs (default: the setting 'step')",
       cxxopts::value<std::string>())
      ("skip-steps", "leading steps to leave out as warm-up in both runs, or auto (default: the setting 'skip_steps')",
       cxxopts::value<std::string>())
      ("rules", "the rule file, for both runs (docs/rules.md; default: INFERSCOPE_RULES, else "
                "./.inferscope_rules.yaml when present)", cxxopts::value<std::string>())
      ("no-rules", "compare with the built-in rules only, whatever rule file is found", inferscope::tools::boolean_flag(),
       "BOOL")
      ("h,help", "show this help")
      ("version", "print the version and exit")
      ("inputs", "BEFORE and AFTER", cxxopts::value<std::vector<std::string>>());
  inferscope::tools::add_report_file_flags(opts, "comparison");  // as iscope-analyze's
  opts.parse_positional({"inputs"});
  opts.positional_help("BEFORE AFTER");
  return opts;
}

int run(int argc, char** argv) {
  auto opts = make_options();
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << kTool << ": " << e.what() << "\n" << opts.help() << "\n";
    return 2;
  }
  if (args.count("help")) return std::cout << opts.help() << "\n", 0;
  inferscope::tools::BooleanFlags flags({"no-rules"});
  if (const std::string bad = flags.parse(args); !bad.empty()) {
    std::cerr << kTool << ": " << bad << "\n" << opts.help() << "\n";
    return 2;
  }
  if (args.count("version")) return std::cout << "iscope-diff " INFERSCOPE_VERSION_STRING "\n", 0;
  const auto inputs = args.count("inputs") ? args["inputs"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (inputs.size() != 2) {
    std::cerr << kTool << ": give two inputs, BEFORE and AFTER (got " << inputs.size() << ")\n" << opts.help() << "\n";
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> outputs;
  if (int rc = parse_outputs(args, inputs, outputs)) return rc;
  if (const std::string bad = inferscope::tools::rules_flags_problem(args, flags.on("no-rules")); !bad.empty()) {
    std::cerr << kTool << ": " << bad << "\n";
    return 2;
  }
  inferscope::analyze::AnalyzeOptions o;
  try {
    o = inferscope::tools::analysis_options(args, kTool, flags.on("no-rules"));
  } catch (const inferscope::config::ConfigError& e) {
    std::cerr << kTool << ": configuration error:\n" << e.what() << "\n";
    return 2;
  } catch (const inferscope::rulefile::RuleFileError& e) {
    std::cerr << kTool << ": " << e.what() << "\n";
    return 2;
  }
  bool bad_usage = false;
  const auto before = analyse(inputs[0], o, bad_usage);
  if (!before) return bad_usage ? 2 : 1;
  const auto after = analyse(inputs[1], o, bad_usage);
  if (!after) return bad_usage ? 2 : 1;
  const auto c = inferscope::report::compare(*before, *after);
  if (!c.related) {
    std::cerr << kTool << ": " << c.unrelated_reason << "\n";
    return 3;
  }
  bool ok = true;
  for (const auto& [fmt, p] : outputs) ok &= write_to(p, fmt, c);
  if (!ok) return 1;
  return whole(*before) && whole(*after) ? 0 : 4;
}

}  // namespace

// A comparison written to standard output that did not reach it (`-o -` into a full disk, `> /dev/full`, a closed
// descriptor) is exit 1 with a message, as in every tool (tool_common.hpp).
int main(int argc, char** argv) { return inferscope::tools::guarded_main(kTool, run, argc, argv); }
