// A sampled dump (mode: sampled) through the analyzer: only the steps wholly inside full windows are steps, the
// slow steps the runtime caught are named by their number in the run (and, kept as ranges only, by the range that
// grew), the reports say the run was sampled and how much of it the windows cover; a dump without windows reads
// as before. Dumps are made with the dump builder, as the runtime would have written them.
#include "analyze/analyzer.hpp"
#include "analyze/rules/rule_settings.hpp"
#include "analyze/summary.hpp"
#include "report/report.hpp"
#include "report/text_writers.hpp"
#include "support/dump_builder.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;
using namespace inferscope;
using analyze::Analysis;

namespace {

constexpr int64_t us = 1'000, ms = 1'000'000;

std::string work_file(const std::string& name) {
  fs::path d = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work";
  fs::create_directories(d);
  return (d / name).string();
}

const analyze::Finding* find(const Analysis& a, const std::string& category) {
  for (const auto& f : a.findings)
    if (f.category == category) return &f;
  return nullptr;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One recorded step: host preprocessing, 20 short kernels (one long one when `big`), a sync.
void full_step(testsupport::Sim& sim, int64_t pre_ns, bool big) {
  sim.range("step", [&] {
    sim.range("preprocess", [&] { sim.host(pre_ns); });
    for (int k = 0; k < 20; ++k) sim.launch("gemm", 50 * us);
    if (big) sim.launch("planted_big_kernel", 20 * ms);
    sim.sync();
  });
  sim.host(200 * us);
}

// A step outside every window: nothing recorded, the time passes.
void unrecorded_step(testsupport::Sim& sim) { sim.set_now(sim.now() + 2 * ms); }

// A step kept as always-on ranges only (a slow step's neighbours): the step range and its child range.
void ranges_only_step(testsupport::Sim& sim, int64_t pre_ns) {
  const int64_t s = sim.now();
  sim.builder().range(sim.thread(), "preprocess", 1, s, s + pre_ns);
  sim.builder().range(sim.thread(), "step", 0, s, s + pre_ns + 1 * ms);
  sim.set_now(s + pre_ns + 1 * ms + 200 * us);
}

// 200 steps; full windows over steps 50-54, 100-104 and 150-154 (the step before each, cut by the window's
// beginning, recorded too, as the runtime routes a range by its end); step 102 is slow inside its window (a
// planted 20 ms kernel); step 130 is slow outside any window (preprocessing 15 ms), kept as ranges with one
// neighbour on each side. An older window was dropped from the ring.
std::string make_sampled_dump() {
  const std::string path = work_file("sampled.iscope");
  dump::DumpBuilder b(path);
  testsupport::Sim sim(b);
  uint32_t index = 1;
  int64_t window_ns = 0;
  for (int i = 0; i < 200; ++i) {
    const bool opens = i == 50 || i == 100 || i == 150;
    if (opens) {
      // Detail went on 1 ms into step i-1: that step is recorded (its range ends inside) but cut.
      const int64_t begin = sim.now() + 1 * ms;
      full_step(sim, 1 * ms, false);
      int64_t slow_start = 0, slow_end = 0;
      for (int k = 0; k < 5; ++k) {
        if (i + k == 102) slow_start = sim.now();
        full_step(sim, 1 * ms, i + k == 102);
        if (i + k == 102) slow_end = sim.now() - 200 * us;
      }
      b.window(++index, begin, sim.now(), uint64_t(i), 5, dump::WindowReason::kPeriodic,
               uint8_t(dump::kWindowFull | (i == 100 ? dump::kWindowPinned : 0)), i == 100 ? 1 : 0);
      if (i == 100) b.slow_step(sim.thread(), 102, slow_start, slow_end, index, true, 9000);
      window_ns += sim.now() - begin;
      i += 5;
      continue;
    }
    if (i >= 129 && i <= 131) {
      const int64_t begin = sim.now();
      ranges_only_step(sim, 1 * ms);
      const int64_t slow_start = sim.now();
      ranges_only_step(sim, 15 * ms);
      const int64_t slow_end = sim.now() - 200 * us;
      ranges_only_step(sim, 1 * ms);
      b.window(++index, begin, sim.now(), 129, 3, dump::WindowReason::kNeighbours, dump::kWindowPinned, 1);
      b.slow_step(sim.thread(), 130, slow_start, slow_end, index, false, 6000);
      i = 131;
      continue;
    }
    unrecorded_step(sim);
  }
  dump::SamplingSummary s{};
  s.begin_ticks = 0;
  s.end_ticks = uint64_t(sim.now());
  s.steps_seen = 200;
  s.steps_in_windows = 15;
  s.window_ticks = uint64_t(window_ns);
  s.windows_opened = 4;
  s.windows_dropped = 1;
  s.slow_steps_seen = 2;
  s.slow_steps_listed = 2;
  s.flags = 1;
  s.records_outside = 12345;
  b.sampling(s, "step");
  b.drop(sim.thread(), "sample_window_dropped", 500);
  b.finish();
  return path;
}

}  // namespace

TEST_CASE("sampled dump: the reader sees its windows, slow steps and coverage") {
  dump::DumpReader r(make_sampled_dump());
  REQUIRE(r.is_sampled());
  CHECK(r.is_ring_snapshot());
  const auto& s = *r.sampling();
  CHECK(s.summary.steps_seen == 200);
  CHECK(r.string_at(s.summary.step_name) == "step");
  CHECK(s.windows.size() == 4);
  CHECK(s.slow_steps.size() == 2);
  CHECK(s.slow_steps[1].bound_us == 6000);
  std::ostringstream summary;
  report::print_summary(r, analyze::summarize(r), summary);
  CHECK(contains(summary.str(), "- sampled: 4 windows kept of 4 opened (1 dropped), 15 of 200 steps in full detail, "
                                "2 slow steps caught, 12345 records sampled out"));
}

TEST_CASE("sampled dump: the steps are those wholly inside full windows, numbered by their place in the run") {
  const Analysis a = analyze::analyze_file(make_sampled_dump(), {});
  REQUIRE(a.sampling.sampled);
  CHECK(a.steps.name == "step");
  CHECK(a.steps.total == 15);  // not the three steps cut by a window's beginning, not the ranges-only ones
  CHECK(a.sampling.step_name == "step");
  CHECK(a.sampling.steps_seen == 200);
  CHECK(a.sampling.step_coverage_pct == doctest::Approx(7.5));
  CHECK(a.sampling.windows_opened == 4);
  CHECK(a.sampling.windows_kept == 4);
  CHECK(a.sampling.windows_dropped == 1);
  CHECK(a.sampling.records_dropped == 500);
  CHECK(a.sampling.time_coverage_pct > 0);
  CHECK(a.sampling.time_coverage_pct < 100);
  REQUIRE(a.sampling.windows.size() == 4);
  CHECK(a.sampling.windows[0].reason == "periodic");
  CHECK(a.sampling.windows[0].steps_analyzed == 5);
  CHECK(a.sampling.windows[2].reason == "neighbours");
  CHECK_FALSE(a.sampling.windows[2].full);
  CHECK(a.sampling.windows[2].steps_analyzed == 0);
  REQUIRE(a.sampling.run_step.size() == 15);
  CHECK(a.sampling.run_step[0] == 50);
  CHECK(a.sampling.run_step[7] == 102);
  CHECK(a.sampling.run_step[14] == 154);
  // The ring's dropped window is sampling, not a loss: no "records were dropped" warning.
  for (auto& w : a.warnings) CHECK_FALSE(contains(w, "records were dropped"));
}

// A rule file's rule as the analysis sees it (lib/rulefile compiles them; here one written by hand): it reads the
// steps of the sampled analysis, and its finding is ranked with the built-in ones.
struct StepCountRule : analyze::rules::CustomRule {
  std::string n = "sampled_steps";
  const std::string& name() const override { return n; }
  std::optional<analyze::Finding> evaluate(const analyze::rules::RuleInput& in, std::vector<std::string>&) const override {
    analyze::Finding f;
    f.category = "custom:" + n;
    f.rule = n;
    f.title = std::to_string(in.stats.total) + " steps analysed";
    f.suggestions.push_back({"nothing", "low", 0, false, ""});
    return f;
  }
};

TEST_CASE("sampled dump: custom rules run over the sampled analysis, built-in rules can be disabled") {
  analyze::AnalyzeOptions o;
  auto settings = std::make_shared<analyze::rules::RuleSettings>();
  settings->custom.push_back(std::make_shared<StepCountRule>());
  settings->disabled.insert("slow_steps");
  o.rules = settings;
  const Analysis a = analyze::analyze_file(make_sampled_dump(), o);
  REQUIRE(a.sampling.sampled);
  const analyze::Finding* custom = nullptr;
  for (const analyze::Finding& f : a.findings) {
    CHECK(f.category != "slow_steps");
    if (f.category == "custom:sampled_steps") custom = &f;
  }
  REQUIRE(custom);
  CHECK(custom->title == "15 steps analysed");  // the steps of the full windows, as the analysis counts them
  const Analysis plain = analyze::analyze_file(make_sampled_dump(), {});
  bool slow = false;
  for (const analyze::Finding& f : plain.findings) slow |= f.category == "slow_steps";
  CHECK(slow);  // the slow step is there to be reported when the rule is not disabled
}

TEST_CASE("sampled dump: the slow step in a window is explained; the one outside is named with the range that grew") {
  const Analysis a = analyze::analyze_file(make_sampled_dump(), {});
  const auto* f = find(a, "slow_steps");
  REQUIRE(f != nullptr);
  REQUIRE_FALSE(f->evidence.empty());
  CHECK(contains(f->evidence[0], "(step 102 of the run)"));
  CHECK(contains(f->evidence[0], "GPU compute"));
  REQUIRE(a.sampling.slow_steps.size() == 2);
  CHECK(a.sampling.slow_steps[0].step == 102);
  CHECK(a.sampling.slow_steps[0].detail == "full");
  const auto& outside = a.sampling.slow_steps[1];
  CHECK(outside.step == 130);
  CHECK(outside.detail == "ranges");
  CHECK(outside.bound_ms == doctest::Approx(6.0));
  CHECK(outside.duration_ms == doctest::Approx(16.0));
  CHECK(outside.grew == "preprocess");
  CHECK(outside.grew_ms == doctest::Approx(14.0));
}

TEST_CASE("sampled dump: every report says the run was sampled, which windows it holds and how much it covers") {
  const Analysis a = analyze::analyze_file(make_sampled_dump(), {});
  std::ostringstream md, html, json;
  report::write_markdown(a, md);
  report::write_html(a, html);
  report::write_json(a, json);
  CHECK(contains(md.str(), "**Sampled run** (mode: sampled): full detail for 15 of 200 steps of 'step' (7.5 %)"));
  CHECK(contains(md.str(), "## Sampled run"));
  CHECK(contains(md.str(), "| 130 |"));
  CHECK(contains(md.str(), "preprocess (+14.000 ms)"));
  CHECK(contains(md.str(), "1 dropped (oldest first; 500 records)"));
  CHECK(contains(html.str(), "<section id=\"sampling\"><h2>Sampled run</h2>"));
  CHECK(contains(json.str(), "\"sampling\": {"));
  CHECK(contains(json.str(), "\"steps_seen\": 200"));
  CHECK(contains(json.str(), "\"reason\": \"neighbours\""));
}

// An adaptive dump (mode: adaptive): a baseline window from the start holding steps 0-29 (step 0 a slow warm-up
// with a planted 20 ms kernel), then two periodic windows of 5 steps; the steps in between were sampled out.
std::string make_adaptive_dump() {
  const std::string path = work_file("adaptive.iscope");
  dump::DumpBuilder b(path);
  b.process("mode", "adaptive");
  testsupport::Sim sim(b);
  int64_t window_ns = 0;
  const int64_t base_end = [&] {
    for (int i = 0; i < 30; ++i) full_step(sim, 1 * ms, i == 0);
    return sim.now();
  }();
  b.window(1, 0, base_end, 0, 30, dump::WindowReason::kBaseline, uint8_t(dump::kWindowFull | dump::kWindowKept));
  window_ns += base_end;
  uint32_t index = 1;
  for (int w = 0; w < 2; ++w) {
    for (int k = 0; k < 40; ++k) unrecorded_step(sim);
    const int64_t begin = sim.now();
    for (int k = 0; k < 5; ++k) full_step(sim, 1 * ms, false);
    b.window(++index, begin, sim.now(), uint64_t(70 + 45 * w), 5);
    window_ns += sim.now() - begin;
  }
  dump::SamplingSummary s{};
  s.end_ticks = uint64_t(sim.now());
  s.steps_seen = 120;
  s.steps_in_windows = 40;
  s.window_ticks = uint64_t(window_ns);
  s.windows_opened = 3;
  s.flags = 1;
  b.sampling(s, "step");
  b.finish();
  return path;
}

TEST_CASE("adaptive dump: the baseline's steps with their warm-up, then the windows'; the reports name the baseline") {
  const Analysis a = analyze::analyze_file(make_adaptive_dump(), {});
  REQUIRE(a.sampling.sampled);
  CHECK(a.sampling.mode == "adaptive");
  CHECK(a.steps.total == 40);
  CHECK(a.steps.warmup == 1);  // step 0, whole because the baseline opened with the session
  REQUIRE(a.sampling.windows.size() == 3);
  CHECK(a.sampling.windows[0].reason == "baseline");
  CHECK(a.sampling.windows[0].steps_analyzed == 30);
  REQUIRE(a.sampling.run_step.size() == 40);
  CHECK(a.sampling.run_step[0] == 0);
  CHECK(a.sampling.run_step[30] == 70);
  std::ostringstream md, json;
  report::write_markdown(a, md);
  report::write_json(a, json);
  CHECK(contains(md.str(), "**Sampled run** (mode: adaptive): full detail for 40 of 120 steps of 'step' (33.3 %)"));
  CHECK(contains(md.str(), "The run was sampled (mode: adaptive): full detail from the start for 30 steps of 'step', "
                           "then in windows; in all, for 40 of 120 steps of 'step' (33.3 %)"));  // the appendix
  CHECK(contains(json.str(), "\"mode\": \"adaptive\""));
  CHECK(contains(json.str(), "\"reason\": \"baseline\""));
}

// The default mode's short run: the baseline still open when the run ended, so every step is in it. The reports
// call it a full capture, not a sampled run.
TEST_CASE("adaptive dump recorded whole (the baseline open at the end): the reports say full capture") {
  const std::string path = work_file("adaptive-whole.iscope");
  {
    dump::DumpBuilder b(path);
    b.process("mode", "adaptive");
    testsupport::Sim sim(b);
    for (int i = 0; i < 12; ++i) full_step(sim, 1 * ms, i == 0);
    b.window(1, 0, sim.now(), 0, 12, dump::WindowReason::kBaseline,
             uint8_t(dump::kWindowFull | dump::kWindowKept | dump::kWindowOpen));
    dump::SamplingSummary s{};
    s.end_ticks = uint64_t(sim.now());
    s.steps_seen = 12;
    s.steps_in_windows = 12;
    s.window_ticks = uint64_t(sim.now());
    s.windows_opened = 1;
    s.flags = 1;
    b.sampling(s, "step");
    b.finish();
  }
  const Analysis a = analyze::analyze_file(path, {});
  REQUIRE(a.sampling.sampled);
  CHECK(a.steps.total == 12);
  std::ostringstream md, html;
  report::write_markdown(a, md);
  report::write_html(a, html);
  CHECK(contains(md.str(), "**Full capture** (mode: adaptive): full detail for the whole run: it ended within the "
                           "baseline, after 12 steps of 'step', so nothing was sampled out."));
  CHECK_FALSE(contains(md.str(), "**Sampled run**"));
  CHECK(contains(html.str(), "<span class=\"badge\">full capture</span>"));
}

TEST_CASE("sampled dump without steps: each timed window is one step; a dump of format 1.0 reads as before") {
  const std::string path = work_file("sampled-timed.iscope");
  {
    dump::DumpBuilder b(path);
    testsupport::Sim sim(b);
    for (uint32_t w = 1; w <= 3; ++w) {
      const int64_t begin = sim.now();
      for (int k = 0; k < 30; ++k) sim.launch("gemm", 40 * us);
      sim.sync();
      b.window(w, begin, sim.now(), 0, 0, dump::WindowReason::kTimed);
      sim.set_now(sim.now() + 100 * ms);
    }
    dump::SamplingSummary s{};
    s.end_ticks = uint64_t(sim.now());
    s.windows_opened = 3;
    b.sampling(s);
    b.finish();
  }
  const Analysis a = analyze::analyze_file(path, {});
  REQUIRE(a.sampling.sampled);
  CHECK_FALSE(a.sampling.by_steps);
  CHECK(a.steps.name == "(sampled windows)");
  CHECK(a.steps.total == 3);
  CHECK(a.end_to_end_ms < 5);  // a window, not the 300 ms between the first and the last
  std::ostringstream md;
  report::write_markdown(a, md);
  CHECK(contains(md.str(), "in timed windows (no step range was seen)"));

  const std::string plain = work_file("not-sampled.iscope");
  {
    dump::DumpBuilder b(plain);
    testsupport::Sim sim(b);
    for (int i = 0; i < 5; ++i) full_step(sim, 1 * ms, false);
    b.finish();
  }
  dump::DumpReader r(plain);
  CHECK_FALSE(r.is_sampled());
  const Analysis p = analyze::analyze_file(plain, {});
  CHECK_FALSE(p.sampling.sampled);
  CHECK(p.steps.total == 5);
  std::ostringstream json;
  report::write_json(p, json);
  CHECK_FALSE(contains(json.str(), "\"sampling\""));
}
