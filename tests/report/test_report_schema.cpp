// The JSON report against its schema: every key the writer (lib/report/json.cpp) writes is documented in
// docs/report-schema.md, and every built-in category is listed there. The keys come from two kinds of analysis: a
// hand-made one with every optional object filled (the sample analysis, plus a generation loop, an asyncio
// service's requests, a sampled run, a run across ranks, a rule file's finding ...), so that a key written only in
// some runs is checked too; and real recordings from tests/fixtures through the analyzer, so that what the analyzer
// fills in practice is checked as it is. sqlite-schema.md's share of the same keys is held by
// tests/export/test_sqlite.cpp. The doc's last section, a key index, is generated from the same keys and compared
// whole, so a key the writer drops shows too.
//
// The doc's convention this test relies on (docs/report-schema.md, "## JSON report"):
// - `### Top level` is a table whose first column names each top-level key in backticks.
// - An object with a section of its own (a heading `### `steps``, `### `findings[]``, ...) names every key below it
//   in that section: in a table's first column (`key`), in backticks in its text, or quoted inside an inline object
//   (`{"index": int, ...}`).
// - An object without a section of its own (`run`, `children`, `program`) names its keys in its row of the
//   top-level table; `run.findings[]` are finding objects, named in the `findings[]` section.
// - Objects whose keys are data (process facts, drop reasons, metric names, program facts) are documented as maps.
#include "analyze/analyzer.hpp"
#include "report/report.hpp"
#include "sample_analysis.hpp"
#include "support/files.hpp"
#include "support/json_keys.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

using namespace inferscope;
namespace fs = std::filesystem;

namespace {

/// Objects of the report whose keys are data, not schema.
const std::set<std::string>& data_keyed() {
  static const std::set<std::string> paths = {"process", "drops", "program", "findings[].metrics",
                                              "run.findings[].metrics"};
  return paths;
}

/// An object documented as another's: the run's findings are finding objects.
const std::map<std::string, std::string>& documented_as() {
  static const std::map<std::string, std::string> alias = {{"run.findings[]", "findings[]"}};
  return alias;
}

/// The sample analysis with every object and key the JSON writer writes only sometimes.
analyze::Analysis full_analysis() {
  using namespace analyze;
  Analysis a = report::testing::sample_analysis();
  a.steps.detected = true;
  a.steps.chosen_because = "the calls of generate, each holding 32 calls of GPT2LMHeadModel.forward";
  a.steps.candidates = {{"GPT2LMHeadModel.forward", "function", 3200, 900.0, true}};
  a.breakdown.gpu_comm_ms = 0.5;  // a rank: by_cause has "communication"
  a.kernels.push_back({"CUDA graph 3", 100, 2.0, 20.0, 0.1, "CUDAGraph.replay", true});
  a.sampling.sampled = true;
  a.sampling.windows = {{1, "baseline", true, false, false, 0.0, 400.0, 0, 30, 0, 30, 9000}};
  a.sampling.slow_steps = {{57, 700.0, 40.0, 15.1, "ranges", 1, "tokenize", 20.0}};
  a.waits.measured = true;
  WaitPartyRow party;
  party.kind = "threads";
  party.name = "producer";
  party.members = {"producer (tid 4711)"};
  party.hot = {{"bpe_merge_word", 3.0}};
  a.waits.parties = {party};
  a.waits.sites = {{"Queue.get", 3.0}};
  a.waits.children = {{"pt_data_worker", 2, 12.0}};
  a.generation.detected = true;
  a.generation.token_function = "GPT2LMHeadModel.forward";
  a.generation.marker = "model class GPT2LMHeadModel";
  a.generation.notes = {"2 calls cut by the trace's end"};
  a.requests.detected = true;
  a.requests.name = "Server.handle";
  a.requests.callbacks = {{"Server.batch_loop", 100, 3, 400.0, 12.0, 0.3, 1.5}};
  a.requests.engine.by_batch = {{"3-4", 12, 3.5, 6.2, 6.1}, {"5-8", 20, 7.0, 8.4, 8.3}};
  a.requests.engine.streamed = true;
  a.requests.notes = {"4 requests began before the trace"};
  a.program.holds = {{"python", "Python functions were traced"}};
  a.findings[0].suggestions[0].needs = {"python"};
  Finding custom;  // a rule file's rule without impact_ms, about requests
  custom.category = "custom:slow_handler";
  custom.rule = "slow_handler";
  custom.title = "A handler holds the event loop";
  custom.per = "request";
  custom.impact_estimated = false;
  custom.suggestions = {{"Await the slow call", "high"}};
  a.findings.push_back(custom);
  a.rule_file = "team.yaml (named by --rules): 1 rule";
  RunAnalysis& run = a.run;
  run.ranks = {{0, 1769, "r0.iscope", "host-a", "0", "communication", 10.0, 6.0, 3.0, 1.0, 0.5, 2.5, 0.0},
               {1, 1770, "r1.iscope", "host-b", "0", "communication", 10.0, 6.0, 3.0, 1.0, 0.0, 3.0, 0.5}};
  run.collectives = {{"ncclAllReduce", 2.0, 2.5, 0.3, 1, 0.9, 0.4}};
  run.host_clocks = {{"host-a", "0", true, true, 0.0, 0.0, 0}, {"host-b", "1", false, true, 0.12, 3.0, 40}};
  Finding wait;
  wait.category = "collective_wait";
  wait.title = "Rank 0 waits for rank 1 in collectives";
  wait.suggestions = {{"Balance the ranks' work", "high"}};
  run.findings = {wait};
  run.warnings = {"the ranks' clocks were estimated"};
  return a;
}

testsupport::JsonKeys keys_of(const analyze::Analysis& a) {
  std::ostringstream out;
  report::write_json(a, out);
  testsupport::JsonKeys k;
  testsupport::collect_json_keys(boost::json::parse(out.str()), "", data_keyed(), k);
  return k;
}

/// The names docs/report-schema.md's JSON section writes in each of its sections: `name` code spans (a span like
/// `lanes[].spans[]` gives each part) and "name" quoted (inside inline objects). Keyed by the section's object:
/// "" for the top-level table, "steps", "findings" ... ("[]" dropped).
std::map<std::string, std::set<std::string>> documented_names() {
  const std::string doc = testsupport::read(fs::path(INFERSCOPE_SOURCE_DIR) / "docs" / "report-schema.md");
  const size_t begin = doc.find("\n## JSON report");
  const size_t end = doc.find("\n## ", begin + 1);
  REQUIRE(begin != std::string::npos);
  const std::string json_section = doc.substr(begin, end - begin);
  std::map<std::string, std::set<std::string>> out;
  static const std::regex heading(R"(\n### ([^\n]*))");
  static const std::regex code_span("`([^`\\n]+)`");
  static const std::regex quoted("\"([A-Za-z_][A-Za-z0-9_]*)\"");
  static const std::regex name_part("[A-Za-z_][A-Za-z0-9_]*");
  std::vector<std::pair<std::string, size_t>> sections;  // (object, offset of its text)
  for (std::sregex_iterator it(json_section.begin(), json_section.end(), heading), e; it != e; ++it) {
    const std::string title = (*it)[1];
    std::smatch m;
    std::string object = "?";  // a section about no object (versioning): its names count nowhere
    if (title == "Top level") object = "";
    else if (std::regex_search(title, m, code_span)) object = std::regex_replace(m[1].str(), std::regex(R"(\[\])"), "");
    sections.emplace_back(object, size_t(it->position()));
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t from = sections[i].second;
    const size_t to = i + 1 < sections.size() ? sections[i + 1].second : json_section.size();
    const std::string text = json_section.substr(from, to - from);
    auto& names = out[sections[i].first];
    for (std::sregex_iterator it(text.begin(), text.end(), code_span), e; it != e; ++it) {
      const std::string span = (*it)[1];
      for (std::sregex_iterator p(span.begin(), span.end(), name_part), pe; p != pe; ++p) names.insert(p->str());
    }
    for (std::sregex_iterator it(text.begin(), text.end(), quoted), e; it != e; ++it) names.insert((*it)[1]);
  }
  return out;
}

std::vector<std::string> parts_of(const std::string& path) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : path + ".") {
    if (c == '.') {
      parts.push_back(part);
      part.clear();
    } else if (c != '[' && c != ']') {
      part += c;
    }
  }
  return parts;
}

/// Where `path` is documented: its section's object and the key names below it that the section must hold.
std::pair<std::string, std::vector<std::string>> section_of(const std::string& path,
                                                            const std::map<std::string, std::set<std::string>>& doc) {
  for (const auto& [prefix, as] : documented_as())
    if (path.rfind(prefix + ".", 0) == 0) return section_of(as + path.substr(prefix.size()), doc);
  std::vector<std::string> parts = parts_of(path);
  if (doc.count(parts.front())) return {parts.front(), {parts.begin() + 1, parts.end()}};
  return {"", parts};  // documented in the top-level table's row
}

/// The key paths of `keys` that docs/report-schema.md does not name where its convention says it should.
std::vector<std::string> undocumented(const testsupport::JsonKeys& keys) {
  const auto doc = documented_names();
  std::vector<std::string> missing;
  for (const std::string& path : keys.paths) {
    const auto [object, names] = section_of(path, doc);
    const auto& have = doc.at(object);
    const bool top_ok = doc.at("").count(parts_of(path).front()) > 0;
    bool ok = top_ok;
    for (const std::string& n : names) ok = ok && have.count(n);
    if (!ok) missing.push_back(path);
  }
  return missing;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

/// The fixtures whose analyses the tests read: a generation loop (torch.profiler), a language model's generate()
/// found as the step, a multithreaded server whose step waits on its producers.
const std::vector<std::string>& fixture_names() {
  static const std::vector<std::string> names = {"kineto_generate.json.gz", "llm_decode_item.iscope",
                                                 "mt_spin_queue_server.iscope"};
  return names;
}

analyze::Analysis fixture_analysis(const std::string& name) {
  return analyze::analyze_file((fs::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / name).string(), {});
}

// docs/report-schema.md's last section: every key path the tests' analyses wrote, grouped by the object that holds
// it, written by this test (INFERSCOPE_UPDATE_GOLDENS=1) and compared with the writer's output on every run.
constexpr const char* kIndexHeading = "\n## Key index (generated)\n";

std::string key_index(const std::set<std::string>& paths) {
  std::map<std::string, std::vector<std::string>> by_parent;
  for (const std::string& p : paths) {
    const size_t dot = p.rfind('.');
    by_parent[dot == std::string::npos ? "" : p.substr(0, dot)].push_back(
        dot == std::string::npos ? p : p.substr(dot + 1));
  }
  std::string out = std::string(kIndexHeading).substr(1) +
                    "\nEvery key the JSON writer wrote for the analyses of tests/report/test_report_schema.cpp (a sample "
                    "with every optional object filled, and three real recordings), by the object that holds it. "
                    "Generated: `INFERSCOPE_UPDATE_GOLDENS=1 build/tests/report/test_report_schema` rewrites this "
                    "section, and the test fails while it differs from what the writer writes. The sections above "
                    "say what each key means.\n\n";
  for (const auto& [parent, names] : by_parent) {
    out += "- " + (parent.empty() ? std::string("top level") : "`" + parent + "`") + ": ";
    for (size_t i = 0; i < names.size(); ++i) out += (i ? ", `" : "`") + names[i] + "`";
    out += "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("report schema: the doc's key index is the keys the writer writes, no more and no fewer") {
  testsupport::JsonKeys keys = keys_of(full_analysis());
  for (const std::string& name : fixture_names()) {
    const testsupport::JsonKeys more = keys_of(fixture_analysis(name));
    keys.paths.insert(more.paths.begin(), more.paths.end());
  }
  const std::string want = key_index(keys.paths);
  const fs::path doc_path = fs::path(INFERSCOPE_SOURCE_DIR) / "docs" / "report-schema.md";
  const std::string doc = testsupport::read(doc_path);
  const size_t at = doc.find(kIndexHeading);
  const std::string have = at == std::string::npos ? "" : doc.substr(at + 1);
  if (const char* u = std::getenv("INFERSCOPE_UPDATE_GOLDENS"); u && *u == '1' && have != want) {
    std::ofstream(doc_path) << (at == std::string::npos ? doc : doc.substr(0, at + 1)) +
                                   (at == std::string::npos ? "\n" : "") + want;
    MESSAGE("rewrote the key index of " << doc_path.string());
    return;
  }
  CHECK_MESSAGE(have == want, "docs/report-schema.md's key index differs from the keys the writer writes (set "
                              "INFERSCOPE_UPDATE_GOLDENS=1 to rewrite it, then review the diff)");
  // The index changes with the writer: a key added or dropped shows in it.
  std::set<std::string> fewer = keys.paths;
  fewer.erase("steps.count");
  CHECK(key_index(fewer) != want);
  CHECK(want.find("- `steps`: ") != std::string::npos);
}

TEST_CASE("report schema: every key of a report with every optional object is in docs/report-schema.md") {
  const testsupport::JsonKeys keys = keys_of(full_analysis());
  // The hand-made analysis reaches the objects written only sometimes: if one of these is missing, the writer
  // changed and full_analysis() should follow it.
  for (const char* p : {"generation.decode.device_copies", "requests.split.in_batch_ms", "requests.callbacks[].delay_ms",
                        "requests.engine.by_batch[].mean_batch", "requests.engine.tpot_p90_ms",
                        "sampling.windows[].steps_analyzed", "sampling.slow_steps[].grew_ms", "program",
                        "findings[].suggestions[].needs", "findings[].impact.per", "findings[].impact.estimated",
                        "steps.candidates[].launches", "steps.chosen_because", "tables.kernels[].whole_graph",
                        "rule_file", "run.host_clocks[].clock_precision_us", "run.findings[].rule",
                        "waits.parties[].hot[].ms_per_step", "breakdown.by_cause.communication"})
    CHECK_MESSAGE(keys.paths.count(p), std::string(p));
  const auto missing = undocumented(keys);
  CHECK_MESSAGE(missing.empty(), "not in docs/report-schema.md: " << joined(missing));
}

TEST_CASE("report schema: every key of the analyses of real recordings is in docs/report-schema.md") {
  for (const std::string& name : fixture_names()) {
    INFO(name);
    const auto missing = undocumented(keys_of(fixture_analysis(name)));
    CHECK_MESSAGE(missing.empty(), "not in docs/report-schema.md: " << joined(missing));
  }
}

TEST_CASE("report schema: the test holds a key the doc does not name") {
  // The check itself: a key no section names is reported, where its section is.
  testsupport::JsonKeys keys;
  keys.paths = {"steps", "steps.count", "steps.not_a_documented_key", "no_such_object", "run.findings[].no_such_key"};
  const auto missing = undocumented(keys);
  CHECK(missing == std::vector<std::string>{"no_such_object", "run.findings[].no_such_key", "steps.not_a_documented_key"});
}

TEST_CASE("report schema: every built-in category is listed in the findings section") {
  const auto doc = documented_names();
  REQUIRE(doc.count("findings"));
  for (const char* c : analyze::kCategories) CHECK_MESSAGE(doc.at("findings").count(c), std::string(c));
  for (const char* c : analyze::kRunCategories) CHECK_MESSAGE(doc.at("findings").count(c), std::string(c));
}
