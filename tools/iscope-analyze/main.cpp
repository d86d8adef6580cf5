// iscope-analyze: reads a dump (or the seeds' JSON event trace) and explains it.
//
//   iscope-analyze DUMP                          a short summary on a terminal; the Markdown report into a pipe or file
//   iscope-analyze DUMP -o report.md|.html|.json|.perfetto.json [--md F] [--html F] [--json F] [--perfetto F] [--step NAME]
//   iscope-analyze DUMP --sqlite out.db          the records and the analysis as SQLite (docs/sqlite-schema.md)
//   iscope-analyze DUMP --summary                what the dump holds (threads, ranges, drops, clock)
//
// Exit status: 0 success (also for a dump cut short by a crash, with a warning), 1 unreadable input (also a
// directory, FIFO, device or socket) or an output that could not be written, 2 bad usage (also an output that
// is the input, or an -o extension it does not know), 3 corrupt data (what could be read is analysed and
// written). docs/cli.md lists every tool's exit statuses.
#include "config/settings.hpp"
#include "analyze/analyzer.hpp"
#include "analyze/children.hpp"
#include "analyze/run/host_clocks.hpp"
#include "analyze/run/ranks.hpp"
#include "analyze/summary.hpp"
#include "dump/files.hpp"
#include "dump/path.hpp"
#include "dump/reader.hpp"
#include "analyze/rules/metrics.hpp"
#include "analyze/rules/rule_settings.hpp"
#include "rulefile/rule_file.hpp"
#include "export/perfetto.hpp"
#include "report/labels.hpp"
#include "report/report.hpp"
#include "report/text_writers.hpp"
#ifdef INFERSCOPE_HAVE_SQLITE
#include "export/sqlite.hpp"
#endif

#include "output_rule.hpp"
#include "analysis_entry.hpp"
#include "tool_options.hpp"

#include <cxxopts.hpp>
#include <inferscope/version.hpp>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sys/stat.h>

using inferscope::tools::boolean_flag;
using inferscope::tools::BooleanFlags;

namespace {

using inferscope::analyze::Analysis;

// "html" for "out/Report.HTML": lower case, no dot.
std::string extension(const std::string& p) {
  const std::string ext = inferscope::dump::split_extension(p).ext;
  std::string e = ext.empty() ? ext : ext.substr(1);
  for (auto& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

// The format -o writes, from the file name: "md", "html", "json" or "perfetto" ("-" is Markdown on stdout);
// empty for a name whose extension says none of these, which is refused rather than guessed at (a report.txt
// silently holding Markdown, or a trace.perfetto.json holding the JSON report, misleads whoever opens it).
std::string output_format(const std::string& p) {
  if (p == "-") return "md";
  std::string lower = p;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.ends_with(".perfetto.json")) return "perfetto";
  const std::string e = extension(p);
  if (e == "md") return "md";
  if (e == "html" || e == "htm") return "html";
  if (e == "json") return "json";
  return "";
}
constexpr const char* kOutputExtensions = ".md, .html, .htm, .json, .perfetto.json (a Perfetto trace), or - for stdout";

// Writes one output through a temporary beside it, renamed into place when complete: a report that fails
// half-way leaves the previous file as it was. Returns false (after saying why) when it cannot be written.
template <class F>
bool write_to(const std::string& path, F&& f) {
  if (path == "-") {
    f(std::cout);
    return true;
  }
  inferscope::dump::AtomicOutput out(path);
  if (out.ok()) f(out.stream());
  if (!out.commit()) {
    std::cerr << "iscope-analyze: " << out.error() << "\n";
    return false;
  }
  return true;
}

// --check-rules FILE: 0 and what it sets, or 1 and every problem with its line and column.
int check_rule_file(const std::string& path) {
  try {
    const auto settings = inferscope::rulefile::load_rule_file(path);
    std::cout << path << ": ok\n" << inferscope::rulefile::describe(*settings);
    return 0;
  } catch (const inferscope::rulefile::RuleFileError& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n";
    return 1;
  }
}

cxxopts::Options make_options() {
  cxxopts::Options opts("iscope-analyze", "Explains an InferScope dump (or a JSON event trace, or a torch.profiler trace, gzipped or not): why each step takes the time it takes.");
  opts.add_options()
      ("o,output", "report file; the format follows the extension: .md, .html, .json, .perfetto.json (the Perfetto "
                   "trace, as --perfetto) or - (Markdown on stdout); repeatable",
       cxxopts::value<std::vector<std::string>>())
      ("perfetto", "write a Chrome/Perfetto trace (dump input only; several dumps: one trace, a lane per rank)", cxxopts::value<std::string>())
      ("sqlite", "write the records and the analysis into this SQLite database (dump input only)", cxxopts::value<std::string>())
      ("step", "the step range, scope or Python function (default: the setting 'step', else the repeated top-level range)", cxxopts::value<std::string>())
      ("skip-steps", "leading steps to leave out as warm-up, or auto (default: the setting 'skip_steps', auto)", cxxopts::value<std::string>())
      ("launch-bound-max-kernel-us", "kernels shorter than this count as short (default: the setting, 20)", cxxopts::value<std::string>())
      ("no-children", "do not open the child processes' dumps beside this one (<stem>.<pid><ext>, --follow-children)",
       boolean_flag(), "BOOL")
      ("rules", "the rule file: your own rules, built-in rules disabled or re-thresholded (docs/rules.md; default: "
                "INFERSCOPE_RULES, else ./.inferscope_rules.yaml when present)", cxxopts::value<std::string>())
      ("no-rules", "analyse with the built-in rules only, whatever rule file is found", boolean_flag(), "BOOL")
      ("check-rules", "check rule files (--check-rules A B C) and say what each sets; nothing is analysed",
       cxxopts::value<std::vector<std::string>>())
      ("list-metrics", "print the metrics, built-in rules and thresholds a rule file can name (Markdown)")
      ("summary", "print what the dump holds: threads, ranges, marks, drops, clock quality", boolean_flag(), "BOOL")
      ("findings", "print the findings digest (one line per finding) on stdout", boolean_flag(), "BOOL")
      ("progress", "print progress on stderr (default: on a terminal for inputs over 256 MiB)", boolean_flag(), "BOOL")
      ("h,help", "show this help")
      ("version", "print the version and exit")
      ("dump", "the dump or JSON trace; several dumps: the ranks of one multi-process run, analysed together",
       cxxopts::value<std::vector<std::string>>());
  inferscope::tools::add_report_file_flags(opts, "report");  // --md, --html, --json: iscope-diff's too
  opts.parse_positional({"dump"});
  opts.positional_help("DUMP [DUMP...]");
  return opts;
}

// --summary: what the dump holds. Exit 3 when it is corrupt (not merely cut short), 1 when unreadable.
int print_summary_of(const std::string& path) {
  try {
    inferscope::dump::DumpReader reader(path);
    if (reader.damage()) std::cerr << "iscope-analyze: warning: " << reader.damage()->message << "\n";
    for (const std::string& skipped : reader.skipped_chunks()) std::cerr << "iscope-analyze: warning: " << skipped << "\n";
    std::vector<std::string> warnings;
    std::map<std::string, uint64_t> drops;
    inferscope::dump::report_file_accounting(reader, warnings, drops);
    for (auto& w : warnings) std::cerr << "iscope-analyze: warning: " << w << "\n";
    auto summary = inferscope::analyze::summarize(reader);
    for (const std::string& d : summary.damage) std::cerr << "iscope-analyze: warning: " << d << "\n";
    inferscope::report::print_summary(reader, summary, std::cout);
    if (summary.records == 0) {  // what it holds is said above; as a run, it is nothing (the report's exit 1)
      std::cerr << "iscope-analyze: " << path << ": holds no events"
                << (reader.complete() ? " (the session recorded nothing)" : " (cut short before its first events)") << "\n";
      return 1;
    }
    // The status the report gives the same damage (a malformed record: exit 3, what could be read written).
    const bool corrupt = (reader.damage() && !reader.damage()->truncated) || !reader.skipped_chunks().empty() ||
                         !summary.damage.empty();
    return corrupt ? 3 : 0;
  } catch (const inferscope::dump::DumpError& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n";
    return 1;
  }
}

// The reports asked for: (format, path); Perfetto traces (from -o x.perfetto.json and --perfetto) apart, as
// they need the dump itself rather than the analysis; -o paths with an extension no writer knows.
struct Requested {
  std::vector<std::pair<std::string, std::string>> reports;
  std::vector<std::string> perfetto, unknown;
  std::string perfetto_flag;  ///< the --perfetto path, to name that flag in a message
  std::string sqlite;
  bool findings = false;
};

// With no output named, what goes to standard output: on a terminal the short summary (a person reads it there, and
// the whole report is one -o away: hundreds of lines scrolled past are read by nobody); into a pipe or a file the
// Markdown report, as scripts and tests have always read it. `-o -` is always the whole Markdown.
std::string default_stdout_format(bool stdout_is_terminal) { return stdout_is_terminal ? "summary" : "md"; }

Requested requested_outputs(const cxxopts::ParseResult& args, bool findings) {
  Requested r;
  if (args.count("output"))
    for (auto& p : args["output"].as<std::vector<std::string>>()) {
      const std::string fmt = output_format(p);
      if (fmt.empty()) r.unknown.push_back(p);
      else if (fmt == "perfetto") r.perfetto.push_back(p);
      else r.reports.emplace_back(fmt, p);
    }
  for (auto& named : inferscope::tools::report_file_flags(args)) r.reports.push_back(named);
  if (args.count("perfetto")) {
    r.perfetto_flag = args["perfetto"].as<std::string>();
    r.perfetto.push_back(r.perfetto_flag);
  }
  if (args.count("sqlite")) r.sqlite = args["sqlite"].as<std::string>();
  r.findings = findings;
  if (r.reports.empty() && r.perfetto.empty() && r.unknown.empty() && r.sqlite.empty() && !r.findings)
    r.reports.emplace_back(default_stdout_format(::isatty(STDOUT_FILENO) == 1), "-");
  return r;
}

// One file named twice, however spelt (`r0.iscope ./r0.iscope`, a link, a hard link): it would count as two ranks.
bool refuses_one_file_twice(const std::vector<std::string>& paths) {
  for (size_t i = 0; i < paths.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const bool same = paths[i] == paths[j] ||
                        std::filesystem::path(paths[i]).lexically_normal() == std::filesystem::path(paths[j]).lexically_normal() ||
                        inferscope::dump::same_file(paths[i], paths[j]);
      if (!same) continue;
      std::cerr << "iscope-analyze: " << paths[j] << (paths[i] == paths[j] ? " is named twice" : " and " + paths[i] +
                   " are the same file") << ": name each rank's dump once\n";
      return true;
    }
  return false;
}

// The ranks of one run are recorded one way: InferScope dumps all (their times on one host's CLOCK_MONOTONIC) or
// JSON traces all (torch.profiler's, on the clock of baseTimeNanoseconds). A mix has no shared clock, so its
// steps never match: refused rather than analysed into a run that says nothing. Exit 1 for an unreadable input, 2
// for a mix, else 0.
int refuses_mixed_formats(const std::vector<std::string>& paths) {
  using inferscope::analyze::InputFormat;
  std::vector<InputFormat> formats;
  for (const auto& p : paths) {
    try {
      formats.push_back(inferscope::analyze::input_format(p));
    } catch (const std::exception& e) {
      std::cerr << "iscope-analyze: " << e.what() << "\n";
      return 1;
    }
  }
  for (size_t i = 1; i < paths.size(); ++i) {
    if (formats[i] == formats.front()) continue;
    const std::string& dump = formats[i] == InputFormat::kDump ? paths[i] : paths.front();
    const std::string& trace = formats[i] == InputFormat::kDump ? paths.front() : paths[i];
    std::cerr << "iscope-analyze: " << dump << " is an InferScope dump and " << trace << " a JSON trace (torch.profiler "
              << "or an event list): the ranks of one run are analysed together only when recorded the same way, as "
              << "their times are on different clocks; name the dumps alone or the traces alone\n";
    return 2;
  }
  return 0;
}

// Several inputs are the ranks of one run: each named once, each readable, all of one format. 0, or the exit status
// after saying why.
int check_inputs(const std::vector<std::string>& paths) {
  if (paths.size() < 2) return 0;
  if (refuses_one_file_twice(paths)) return 2;
  return refuses_mixed_formats(paths);
}

// Every output as the command line named it, for the one rule (output_rule.hpp).
std::vector<inferscope::tools::NamedOutput> named_outputs(const cxxopts::ParseResult& args) {
  std::vector<inferscope::tools::NamedOutput> out;
  if (args.count("output"))
    for (const auto& p : args["output"].as<std::vector<std::string>>()) out.push_back({"-o", p});
  for (const auto& [fmt, p] : inferscope::tools::report_file_flags(args)) out.push_back({"--" + fmt, p});
  if (args.count("perfetto")) out.push_back({"--perfetto", args["perfetto"].as<std::string>()});
  if (args.count("sqlite")) out.push_back({"--sqlite", args["sqlite"].as<std::string>(), /*stdout_ok=*/false});
  return out;
}

// Checked before the analysis, so that nothing is written when one output is wrong: exit status 2 (with the message)
// for an output the one rule refuses (an empty name, an option, a FIFO, device, socket or directory, an input or a
// child dump beside it unless `children` is false), --sqlite with several inputs, an -o with an unknown extension.
int check_outputs(const std::vector<std::string>& paths, const cxxopts::ParseResult& args, const Requested& r,
                  bool children) {
  const std::vector<inferscope::tools::InputFile> inputs = inferscope::tools::files_read(paths, children);
  for (const inferscope::tools::NamedOutput& o : named_outputs(args))
    if (const std::string why = inferscope::tools::output_problem(o, inputs, "--md, --html, --json, --perfetto, --sqlite, -o");
        !why.empty()) {
      std::cerr << "iscope-analyze: " << why << "\n";
      return 2;
    }
  if (!r.sqlite.empty() && paths.size() > 1) {
    // The database is one process's: its row ids, its step column and its analysis tables are that dump's; the
    // ranks of a run would need a process in every row and every analysis, which the schema does not have.
    std::cerr << "iscope-analyze: --sqlite writes the database of one dump, and " << paths.size() << " were named: "
              << "write one per rank (iscope-analyze " << paths.front() << " --sqlite RANK.db, and so for each); "
              << "the run across the ranks is in the JSON report's \"run\" (-o run.json)\n";
    return 2;
  }
  if (!r.unknown.empty()) {
    const std::string ext = extension(r.unknown.front());
    std::cerr << "iscope-analyze: -o " << r.unknown.front() << ": "
              << (ext.empty() ? std::string("no extension") : "unknown extension ." + ext)
              << " (the extension picks the format); use " << kOutputExtensions << "\n";
    return 2;
  }
  return 0;
}

// Analyses the inputs (analysis_entry.hpp: the first in full; several: the run across them; one dump: its children
// unless `children` is false); a dump that also becomes a Perfetto trace or a database is opened (and its chunks
// checked) once for all, into `reader`. Returns 0, or the exit status after saying why.
int analyse(const std::vector<std::string>& paths, const inferscope::analyze::AnalyzeOptions& o, bool children,
            bool keep_reader, std::optional<inferscope::dump::DumpReader>& reader, Analysis& a) {
  const std::string& path = paths.front();
  try {
    inferscope::tools::AnalysisInputs in{paths, children, o, nullptr};
    if (keep_reader && inferscope::analyze::input_format(path) == inferscope::analyze::InputFormat::kDump)
      in.reader = &reader.emplace(path);
    a = inferscope::tools::analyze_inputs(in);
    return 0;
  } catch (const inferscope::analyze::UnknownStep& e) {  // the command's fault, not the file's
    std::cerr << "iscope-analyze: " << e.what() << "\n";
    return 2;
  } catch (const inferscope::dump::DumpError& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n";
  } catch (const inferscope::analyze::InputError& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << "iscope-analyze: " << inferscope::analyze::out_of_memory_message(path) << "\n";
  }
  return 1;
}

// The Perfetto trace of the dumps named together (the ranks of one run) on one time line, each process labelled
// with its rank ("rank 1"; the launcher, which has none, by its file name), each with the Steps track of its own
// analysis (`ranks`: analyze_rank_dumps's, one per path). `first` is the first dump, open.
void write_run_trace(const std::vector<std::string>& paths, const inferscope::dump::DumpReader& first,
                     const std::vector<inferscope::analyze::ChildProcess>& ranks,
                     const std::vector<inferscope::analyze::HostClock>& clocks, std::ostream& s) {
  std::vector<std::unique_ptr<inferscope::dump::DumpReader>> more;  // the other ranks, traces imported in memory
  std::vector<inferscope::exporter::RunTracePart> parts;
  for (size_t i = 0; i < paths.size(); ++i) {
    const inferscope::dump::DumpReader* r = &first;
    if (i) r = more.emplace_back(inferscope::import::open_input(paths[i]).reader).get();
    const std::string rank = r->process_value("rank");
    inferscope::exporter::RunTracePart part{r, rank.empty() ? std::filesystem::path(paths[i]).filename().string() : "rank " + rank};
    if (i < ranks.size() && ranks[i].path == paths[i] && ranks[i].error.empty()) {
      part.steps = &ranks[i].step_stats;
      part.representative_step = ranks[i].representative_step;
    }
    const std::string host = r->process_value("hostname");
    part.clock_offset_ns = inferscope::analyze::offset_ns_of(clocks, host);  // 0 on one host
    for (const auto& c : clocks)
      if (c.hostname == host && !c.estimated && !c.reference)
        std::cerr << "iscope-analyze: warning: " << paths[i] << ": host " << host
                  << "'s clock offset could not be estimated (too few collectives); its lanes in the Perfetto trace "
                     "are on its own clock, not aligned with the others\n";
    parts.push_back(std::move(part));
  }
  inferscope::exporter::write_perfetto_run(parts, s);
}

// The reports and traces; false when one could not be written (each said why). `paths`: the dumps named on the
// command line (several: the ranks of one run, in one Perfetto trace).
bool write_outputs(const Requested& r, const Analysis& a, const std::optional<inferscope::dump::DumpReader>& reader,
                   const std::vector<std::string>& paths) {
  bool ok = true;
  if (r.findings) std::cout << inferscope::analyze::findings_digest(a);
  for (auto& [fmt, p] : r.reports) {
    if (fmt == "html") ok &= write_to(p, [&](std::ostream& s) { inferscope::report::write_html(a, s); });
    else if (fmt == "json") ok &= write_to(p, [&](std::ostream& s) { inferscope::report::write_json(a, s); });
    else if (fmt == "summary") ok &= write_to(p, [&](std::ostream& s) { inferscope::report::write_terminal_summary(a, s); });
    else ok &= write_to(p, [&](std::ostream& s) { inferscope::report::write_markdown(a, s); });
  }
  for (const auto& p : r.perfetto) {
    if (!reader) {
      // Named by the flag that asked for it ("--perfetto needs a dump", "-o x.perfetto.json needs a dump").
      const bool from_flag = p == r.perfetto_flag;
      std::cerr << "iscope-analyze: " << (from_flag ? std::string("--perfetto") : "-o " + p)
                << " needs a dump, not a JSON trace\n";
      ok = false;
      continue;
    }
    try {
      ok &= write_to(p, [&](std::ostream& s) {
        if (paths.size() > 1) write_run_trace(paths, *reader, a.children, a.run.host_clocks, s);
        else inferscope::exporter::write_perfetto(*reader, s, &a);  // its steps, on the reports' time origin
      });
    } catch (const inferscope::dump::DumpError& e) {
      std::cerr << "iscope-analyze: " << e.what() << "\n";
      ok = false;
    }
  }
#ifdef INFERSCOPE_HAVE_SQLITE
  if (!r.sqlite.empty())
    ok &= inferscope::exporter::write_sqlite_for_tool(reader ? &*reader : nullptr, a, r.sqlite, "iscope-analyze", std::cerr);
#else
  if (!r.sqlite.empty()) {
    std::cerr << "iscope-analyze: this build has no SQLite export (libsqlite3 was not found when it was built): "
                 "--sqlite is unavailable\n";
    ok = false;
  }
#endif
  return ok;
}

}  // namespace

namespace {
int run(int argc, char** argv);
}

// What reached standard output is part of the result (a report to stdout that could not be written is exit 1 with a
// message, not a silent 0): tool_common.hpp.
int main(int argc, char** argv) { return inferscope::tools::guarded_main("iscope-analyze", run, argc, argv); }

namespace {

// --help, --version, --list-metrics, --check-rules: answered without analysing anything; nullopt when there is an
// analysis to do.
std::optional<int> answered_alone(const cxxopts::ParseResult& args, const cxxopts::Options& opts) {
  if (args.count("help")) {
    std::cout << opts.help() << "\n";
    return 0;
  }
  if (args.count("version")) {
    std::cout << "iscope-analyze " INFERSCOPE_VERSION_STRING "\n";
    return 0;
  }
  if (args.count("list-metrics")) {
    std::cout << inferscope::analyze::rules::metrics_markdown() << "\n" << inferscope::analyze::rules::thresholds_markdown();
    return 0;
  }
  if (args.count("check-rules")) {  // --check-rules A B C: every file named after it is a rule file to check
    std::vector<std::string> files = args["check-rules"].as<std::vector<std::string>>();
    if (args.count("dump"))
      for (const std::string& f : args["dump"].as<std::vector<std::string>>()) files.push_back(f);
    int status = 0;
    for (const std::string& f : files) status = std::max(status, check_rule_file(f));
    return status;
  }
  return std::nullopt;
}

// The analyzer's options from the flags and the settings model; nullopt after saying why they cannot be used
// (exit 2). `path`: the first input, whose size decides whether progress is shown by default.
std::optional<inferscope::analyze::AnalyzeOptions> analysis_options_for(const cxxopts::ParseResult& args,
                                                                        const BooleanFlags& flags, const std::string& path) {
  inferscope::analyze::AnalyzeOptions o;
  try {
    o = inferscope::tools::analysis_options(args, "iscope-analyze", flags.on("no-rules"));
    if (o.rules && o.rules->named_by != "named by --rules")  // a file not named on this command line: say so
      std::cerr << "iscope-analyze: using the rule file " << inferscope::tools::rule_file_line(o.rules.get()) << "\n";
  } catch (const inferscope::config::ConfigError& e) {
    std::cerr << "iscope-analyze: configuration error:\n" << e.what() << "\n";
    return std::nullopt;
  } catch (const inferscope::rulefile::RuleFileError& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n";
    return std::nullopt;
  }
  struct stat st{};
  bool big = ::stat(path.c_str(), &st) == 0 && st.st_size > (256ll << 20);
  o.progress = flags.on("progress") || (big && ::isatty(2));
  return o;
}

// Analyses the inputs (the first in full; several: the run across them; one dump: its children unless `children`
// is false) and writes what was asked. The exit status.
int analyse_and_write(const std::vector<std::string>& paths, const Requested& requested,
                      const inferscope::analyze::AnalyzeOptions& o, bool children) {
  const std::string& path = paths.front();
  Analysis a;
  std::optional<inferscope::dump::DumpReader> reader;
  if (int status = analyse(paths, o, children, !requested.perfetto.empty() || !requested.sqlite.empty(), reader, a))
    return status;
  if (const std::string why = inferscope::tools::nothing_to_analyse(a, path); !why.empty()) {
    for (auto& w : a.warnings) std::cerr << "iscope-analyze: warning: " << w << "\n";  // damage, if that is why
    std::cerr << "iscope-analyze: " << why << "\n";
    return 1;
  }
  for (auto& w : a.warnings)  // how the steps were found, a timeline drawn cut: notes, as the reports say
    std::cerr << "iscope-analyze: " << (inferscope::report::note_label(w).empty() ? "warning: " : "note: ") << w << "\n";
  const bool ok = write_outputs(requested, a, reader, paths);
  if (a.partial) return 3;  // corrupt (not merely cut short): partial output was written
  return ok ? 0 : 1;
}

int run(int argc, char** argv) {
  cxxopts::Options opts = make_options();
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "iscope-analyze: " << e.what() << "\n" << opts.help() << "\n";
    return 2;
  }
  BooleanFlags flags({"no-children", "summary", "findings", "progress", "no-rules"});
  if (const std::string bad = flags.parse(args); !bad.empty()) {
    std::cerr << "iscope-analyze: " << bad << "\n" << opts.help() << "\n";
    return 2;
  }
  if (const std::optional<int> status = answered_alone(args, opts)) return *status;
  if (const std::string bad = inferscope::tools::rules_flags_problem(args, flags.on("no-rules")); !bad.empty()) {
    std::cerr << "iscope-analyze: " << bad << "\n";
    return 2;
  }
  if (!args.count("dump")) {
    std::cerr << "iscope-analyze: no dump given\n" << opts.help() << "\n";
    return 2;
  }
  const std::vector<std::string> paths = args["dump"].as<std::vector<std::string>>();
  if (flags.on("summary")) {
    if (paths.size() > 1) {
      std::cerr << "iscope-analyze: --summary takes one dump, not " << paths.size() << "\n";
      return 2;
    }
    return print_summary_of(paths.front());
  }
  const Requested requested = requested_outputs(args, flags.on("findings"));
  const bool children = paths.size() == 1 && !flags.on("no-children");
  if (int status = check_outputs(paths, args, requested, children)) return status;
  if (int status = check_inputs(paths)) return status;
  const auto o = analysis_options_for(args, flags, paths.front());
  if (!o) return 2;
  return analyse_and_write(paths, requested, *o, children);
}

}  // namespace
