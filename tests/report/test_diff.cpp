// iscope-diff (lib/report/diff.hpp and tools/iscope-diff): a sync-bound program against the same program with
// the per-token syncs removed, unrelated programs, bad inputs, the bootstrap interval and the JSON keys.
#include "analyze/analyzer.hpp"
#include "report/diff.hpp"
#include "support/dump_builder.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace inferscope;

namespace {

constexpr int64_t us = 1'000;

fs::path work_dir() {
  fs::path d = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "report" / "diff_work";
  fs::create_directories(d);
  return d;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A decoder: 30 tokens per step, each a kernel and (with `syncs`) a Tensor.item() that waits for it; without
// them one sync at the end of the step. A little host work varies from step to step, as it does in a real run.
fs::path decoder(const std::string& name, bool syncs, bool end_chunk = true) {
  const fs::path p = work_dir() / (name + ".iscope");
  dump::DumpBuilder b(p.string());
  testsupport::Sim sim(b);
  for (int i = 0; i < 24; ++i) {
    sim.range("step", [&] {
      sim.py("Model.run_step", [&] {
        sim.host((i * 7 % 5) * 40 * us);
        for (int k = 0; k < 30; ++k) {
          sim.py("decode_step", [&] { sim.launch("softmax_kernel", 60 * us); sim.host(20 * us); });
          if (syncs) sim.py("Tensor.item", [&] { sim.sync("cudaStreamSynchronize"); }, "torch/_tensor.py", 1);
          sim.host(60 * us);
        }
        if (!syncs) sim.py("Tensor.item", [&] { sim.sync("cudaStreamSynchronize"); }, "torch/_tensor.py", 1);
      }, "serve.py", 40);
    });
    sim.host(200 * us);
  }
  b.finish(end_chunk);
  return p;
}

// A server loop whose steps fall into two groups: most run in about 3 ms, and `slow` of every 10 wait 60 ms for
// their input (a host wait). Fixing most of the waits leaves the median, a fast step either way, where it was, and
// halves the mean: the bimodal runs the analysis report headlines by their mean.
fs::path bimodal(const std::string& name, int slow) {
  const fs::path p = work_dir() / (name + ".iscope");
  dump::DumpBuilder b(p.string());
  testsupport::Sim sim(b);
  for (int i = 0; i < 40; ++i) {
    sim.range("step", [&] {
      sim.py("Server.handle", [&] {
        if (i % 10 >= 10 - slow) sim.py("Queue.get", [&] { sim.host(60'000 * us); }, "queue.py", 154);
        sim.host((2'500 + (i * 37 % 11) * 10) * us);  // 2.5 to 2.6 ms of host work
        sim.launch("gemm_kernel", 400 * us);
        sim.sync("cudaStreamSynchronize");
      }, "serve.py", 12);
    });
    sim.host(100 * us);
  }
  b.finish();
  return p;
}

// A training loop sharing no step name, kernel or Python function with the decoder.
fs::path trainer() {
  const fs::path p = work_dir() / "trainer.iscope";
  dump::DumpBuilder b(p.string());
  testsupport::Sim sim(b);
  for (int i = 0; i < 12; ++i)
    sim.range("train_iter", [&] {
      sim.py("Trainer.train_step", [&] { sim.launch("ampere_sgemm_128x64_tn", 2000 * us); sim.sync(); }, "train.py", 9);
    });
  b.finish();
  return p;
}

struct Run {
  int rc = -1;
  std::string out, err;
};

Run run_diff(const std::string& args) {
  const fs::path o = work_dir() / "cli.out", e = work_dir() / "cli.err";
  const std::string cmd = std::string(ISCOPE_DIFF_EXE) + " " + args + " >" + o.string() + " 2>" + e.string();
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read(o), read(e)};
}

const report::FindingChange* finding(const report::Comparison& c, const std::string& category) {
  for (const auto& f : c.findings)
    if (f.category == category) return &f;
  return nullptr;
}

const report::BreakdownChange* part(const report::Comparison& c, const std::string& key) {
  for (const auto& b : c.breakdown)
    if (b.key == key) return &b;
  return nullptr;
}

}  // namespace

TEST_CASE("diff: removing the per-token syncs makes the step faster, and the comparison says why") {
  const auto before = analyze::analyze_file(decoder("with_syncs", true).string(), {});
  const auto after = analyze::analyze_file(decoder("without_syncs", false).string(), {});
  REQUIRE(before.steps.count >= 5);
  REQUIRE(before.steps.steady_durations_ms.size() == before.steps.count);
  const auto c = report::compare(before, after);
  CHECK(c.related);

  CHECK(c.latency.delta_p50_ms < 0);
  REQUIRE(c.latency.interval.available);
  CHECK(c.latency.interval.low_ms <= c.latency.delta_p50_ms);
  CHECK(c.latency.interval.high_ms >= c.latency.delta_p50_ms);
  CHECK(c.latency.interval.high_ms < 0);  // excludes 0
  CHECK(c.latency.interval.low_ms < c.latency.interval.high_ms);  // the steps vary: a real interval
  CHECK(c.latency.verdict == "faster");

  const auto* sync = finding(c, "sync_bound");
  REQUIRE(sync);
  CHECK(sync->impact_before_ms > 0);
  CHECK((sync->change == "disappeared" || sync->change == "shrank"));
  CHECK(sync->delta_ms < 0);

  const auto* sync_wait = part(c, "sync_wait");
  REQUIRE(sync_wait);
  CHECK(sync_wait->delta_ms < 0);
  const auto* idle_sync = part(c, "gpu_idle_waiting_on_sync");
  REQUIRE(idle_sync);
  CHECK(idle_sync->delta_ms < 0);
  const auto* step = part(c, "step");
  REQUIRE(step);
  CHECK(step->delta_ms < 0);

  bool item_fewer = false;
  for (const auto& p : c.python_by_count) item_fewer |= p.name == "Tensor.item" && p.delta_count() < 0;
  CHECK(item_fewer);
  CHECK(c.kernels_by_count.empty());  // the same kernels, as often

  std::ostringstream md;
  report::write_diff_markdown(c, md);
  CHECK(md.str().find("faster") != std::string::npos);
  CHECK(md.str().find("bootstrap of the difference of medians") != std::string::npos);
  CHECK(md.str().find("`sync_bound`") != std::string::npos);
  std::ostringstream html;
  report::write_diff_html(c, html);
  CHECK(html.str().find("<!DOCTYPE html>") == 0);
  CHECK(html.str().find("sync_bound") != std::string::npos);
}

TEST_CASE("diff: the bootstrap interval of the difference of medians") {
  const std::vector<double> a = {10, 10.5, 9.5, 10.2, 9.8, 10.1, 9.9}, b = {7, 7.4, 6.6, 7.1, 6.9, 7.2, 6.8};
  const auto iv = report::median_difference_interval(a, b);
  REQUIRE(iv.available);
  CHECK(iv.resamples == report::kBootstrapResamples);
  CHECK(iv.high_ms < 0);
  CHECK(iv.low_ms >= -3.9);
  const auto again = report::median_difference_interval(a, b);
  CHECK(again.low_ms == iv.low_ms);  // fixed seed: the same interval every time
  CHECK(again.high_ms == iv.high_ms);

  const auto same = report::median_difference_interval(a, a);
  CHECK(same.low_ms <= 0);
  CHECK(same.high_ms >= 0);

  SUBCASE("fewer than 5 steps on a side: not available, and said so") {
    const auto few = report::median_difference_interval(a, {7, 7.1, 6.9, 7.0});
    CHECK_FALSE(few.available);
    CHECK(few.note.find("fewer than 5") != std::string::npos);
    analyze::StepStats sb, sa;
    sb.steady_durations_ms = a;
    sa.steady_durations_ms = {7, 7.1};
    sb.p50_ms = 10, sa.p50_ms = 7;
    const auto l = report::compare_latency(sb, sa);
    CHECK(l.verdict == "unknown");
    CHECK(l.delta_p50_ms == doctest::Approx(-3));
  }
}

TEST_CASE("diff: when the host ran ahead on a side, both sides are compared by the GPU's pace") {
  analyze::StepStats sb, sa;
  sb.steady_durations_ms = {19.7, 19.8, 19.6, 19.9, 19.7, 19.8};
  sb.completion_periods_ms = {19.8, 19.8, 19.7, 19.9, 19.8, 19.8};
  sb.p50_ms = 19.75, sb.gpu_paced_ms = 19.8;
  sa.steady_durations_ms = {0.12, 0.12, 0.11, 0.13, 0.12, 0.12};  // the host's ranges: it only queued
  sa.completion_periods_ms = {2.6, 2.7, 2.6, 2.6, 2.5, 2.6};
  sa.p50_ms = 0.12, sa.gpu_paced_ms = 2.6, sa.host_ahead = true;
  const auto l = report::compare_latency(sb, sa);
  CHECK(l.paced);
  CHECK(l.after.p50_ms == doctest::Approx(2.6));
  CHECK(l.delta_p50_ms == doctest::Approx(2.6 - 19.8));
  REQUIRE(l.interval.available);
  CHECK(l.interval.high_ms < -16);  // the ranges would have said -19.6
  CHECK(l.interval.low_ms > -17.5);
  sa.host_ahead = false;
  CHECK_FALSE(report::compare_latency(sb, sa).paced);
}

TEST_CASE("diff: bimodal steps are compared on the report's basis, the mean, with p50, mean and p90 side by side") {
  const auto before = analyze::analyze_file(bimodal("bimodal_before", 3).string(), {});
  const auto after = analyze::analyze_file(bimodal("bimodal_after", 1).string(), {});
  REQUIRE_FALSE(before.steps.alike);  // the analysis report headlines these by their mean
  REQUIRE(before.steps.basis == "mean");
  const auto c = report::compare(before, after);
  const auto& l = c.latency;
  CHECK(l.headline == "mean");
  CHECK(l.headline_reason.find("not alike") != std::string::npos);
  REQUIRE(l.statistics.size() == 3);
  CHECK(l.statistics[0].statistic == "p50");
  CHECK(l.statistics[1].statistic == "mean");
  CHECK(l.statistics[2].statistic == "p90");
  const auto& mean = l.headline_change();
  CHECK(mean.statistic == "mean");
  CHECK(mean.delta_pct < -40);  // 21.0 ms -> 9.0 ms
  REQUIRE(mean.interval.available);
  CHECK(mean.interval.high_ms < 0);
  CHECK(mean.verdict == "faster");
  CHECK(mean.interval.note.find("difference of means") != std::string::npos);
  // The median is a fast step on both sides: alone it would have headlined "no clear change".
  CHECK(std::fabs(l.statistics[0].delta_pct) < 5);
  CHECK(l.statistics[0].verdict == "no clear change");
  CHECK(l.verdict == "no clear change");  // the JSON's "verdict" stays the median's, as documented

  std::ostringstream md;
  report::write_diff_markdown(c, md);
  const std::string text = md.str();
  CHECK(text.find("Step latency (mean: the steps of both runs are not alike): ") != std::string::npos);
  CHECK(text.find("): faster.") != std::string::npos);
  CHECK(text.find("95 % interval of the change in the mean: [") != std::string::npos);
  CHECK(text.find("Beside it: p50 ") != std::string::npos);
  CHECK(text.find("| mean (ms), the headline |") != std::string::npos);
  CHECK(text.find("| p50 (ms) |") != std::string::npos);
  CHECK(text.find("| p90 (ms) |") != std::string::npos);
  std::ostringstream js;
  report::write_diff_json(c, js);
  const auto root = boost::json::parse(js.str());
  const auto& lat = root.at("latency").as_object();
  CHECK(lat.at("headline_statistic").as_string() == "mean");
  CHECK(lat.at("headline_verdict").as_string() == "faster");
  CHECK(lat.at("statistics").as_array().size() == 3);
  CHECK(lat.at("verdict").as_string() == "no clear change");

  // Steps alike on both sides: the median, as before.
  const auto alike = report::compare(analyze::analyze_file(decoder("alike_a", true).string(), {}),
                                     analyze::analyze_file(decoder("alike_b", false).string(), {}));
  CHECK(alike.latency.headline == "p50");
  CHECK(alike.latency.headline_reason.empty());
}

TEST_CASE("diff: findings matched by category") {
  analyze::Finding s, c, w;
  s.category = "sync_bound", s.impact_ms = 2, s.primary = true;
  c.category = "cpu_bound", c.impact_ms = 1;
  w.category = "gpu_bound", w.impact_ms = 3;
  const auto fs = report::compare_findings({s, c}, {c, w});
  REQUIRE(fs.size() == 3);
  CHECK(fs[0].category == "gpu_bound");  // largest change first
  CHECK(fs[0].change == "appeared");
  CHECK(fs[1].category == "sync_bound");
  CHECK(fs[1].change == "disappeared");
  CHECK(fs[1].primary_before);
  CHECK(fs[2].change == "unchanged");
}

TEST_CASE("iscope-diff: outputs, exit statuses and messages") {
  const auto before = decoder("cli_before", true), after = decoder("cli_after", false);

  SUBCASE("--version") {
    const auto r = run_diff("--version");
    CHECK(r.rc == 0);
    CHECK(r.out == "iscope-diff " ISCOPE_VERSION "\n");  // CMakeLists.txt's project version
  }
  SUBCASE("Markdown on stdout by default; -o picks the format by extension, repeatable") {
    const fs::path js = work_dir() / "diff.json", html = work_dir() / "diff.html";
    fs::remove(js), fs::remove(html);
    const auto r = run_diff(before.string() + " " + after.string() + " -o " + js.string() + " -o " + html.string() + " -o -");
    CHECK(r.rc == 0);
    CHECK(r.out.find("# InferScope comparison") == 0);
    CHECK(read(html).find("<!DOCTYPE html>") == 0);
    const auto v = boost::json::parse(read(js)).as_object();
    for (const char* k : {"schema_version", "before", "after", "related", "unrelated_reason", "latency", "breakdown",
                          "findings", "kernels", "python", "notes"})
      CHECK_MESSAGE(v.contains(k), k);
    const auto& lat = v.at("latency").as_object();
    for (const char* k : {"before", "after", "delta_p50_ms", "delta_p50_pct", "verdict", "interval"})
      CHECK_MESSAGE(lat.contains(k), k);
    const auto& iv = lat.at("interval").as_object();
    for (const char* k : {"available", "method", "level", "resamples", "seed", "low_ms", "high_ms", "note"})
      CHECK_MESSAGE(iv.contains(k), k);
    CHECK(iv.at("method").as_string() == "bootstrap_difference_of_medians");
    CHECK(lat.at("verdict").as_string() == "faster");
    CHECK(v.at("kernels").as_object().contains("by_time"));
    CHECK(v.at("python").as_object().contains("by_count"));
  }
  SUBCASE("--md, --html, --json name the format whatever the extension, beside -o, as iscope-analyze's do") {
    const fs::path md = work_dir() / "diff.md.txt", html = work_dir() / "diff.page", js = work_dir() / "diff.out",
                   o = work_dir() / "diff_o.md";
    for (const auto& p : {md, html, js, o}) fs::remove(p);
    const auto r = run_diff(before.string() + " " + after.string() + " --md " + md.string() + " --html " + html.string() +
                            " --json " + js.string() + " -o " + o.string());
    CHECK(r.rc == 0);
    CHECK(r.out.empty());  // an output was named: nothing on stdout
    CHECK(read(md).find("# InferScope comparison") == 0);
    CHECK(read(md) == read(o));
    CHECK(read(html).find("<!DOCTYPE html>") == 0);
    CHECK(boost::json::parse(read(js)).as_object().contains("latency"));
    const auto opt = run_diff(before.string() + " " + after.string() + " --json -o");
    CHECK(opt.rc == 2);
    CHECK(opt.err.find("--json -o: is an option") != std::string::npos);
    const auto empty = run_diff(before.string() + " " + after.string() + " --html=");
    CHECK(empty.rc == 2);
    CHECK(empty.err.find("--html: an empty file name") != std::string::npos);
  }
  SUBCASE("unrelated programs: exit 3, said so, nothing written") {
    const fs::path md = work_dir() / "unrelated.md";
    fs::remove(md);
    const auto r = run_diff(before.string() + " " + trainer().string() + " -o " + md.string());
    CHECK(r.rc == 3);
    CHECK(r.err.find("look unrelated") != std::string::npos);
    CHECK_FALSE(fs::exists(md));
    CHECK(r.out.empty());
  }
  SUBCASE("an input cut short: the comparison is written with a note naming it, exit 4") {
    // Without END (the process did not stop cleanly), and cut in the middle of a chunk (a copy in progress).
    const fs::path no_end = decoder("cli_after_no_end", false, /*end_chunk=*/false);
    const fs::path cut = work_dir() / "cli_after_cut.iscope";
    fs::copy_file(after, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, fs::file_size(cut) * 3 / 4);
    struct Case {
      fs::path before, after;
      std::string which, incomplete;
    };
    for (const Case& k : {Case{before, no_end, "AFTER", no_end.string()}, Case{before, cut, "AFTER", cut.string()},
                          Case{cut, after, "BEFORE", cut.string()}}) {
      CAPTURE(k.which);
      CAPTURE(k.incomplete);
      const fs::path md = work_dir() / "cut.md", js = work_dir() / "cut.json";
      fs::remove(md), fs::remove(js);
      const auto r = run_diff(k.before.string() + " " + k.after.string() + " -o " + md.string() + " -o " + js.string());
      CHECK(r.rc == 4);
      CHECK(read(md).find("- Note: " + k.which + " (") != std::string::npos);
      CHECK(read(md).find(") is incomplete: the dump was cut short") != std::string::npos);
      const auto notes = boost::json::parse(read(js)).as_object().at("notes").as_array();
      const std::string expected = k.which + " (" + k.incomplete + ") is incomplete: the dump was cut short";
      CHECK(std::any_of(notes.begin(), notes.end(), [&](const boost::json::value& n) {
        return std::string(n.as_string()).rfind(expected, 0) == 0;
      }));
    }
    const auto whole = run_diff(before.string() + " " + after.string());  // both whole: no note, exit 0
    CHECK(whole.rc == 0);
    CHECK(whole.out.find("is incomplete") == std::string::npos);
  }
  SUBCASE("a missing input is named, exit 1") {
    const std::string missing = (work_dir() / "no_such_run.iscope").string();
    const auto r = run_diff(before.string() + " " + missing);
    CHECK(r.rc == 1);
    CHECK(r.err.find(missing) != std::string::npos);
  }
  SUBCASE("bad usage: one input, an unknown extension: exit 2") {
    CHECK(run_diff(before.string()).rc == 2);
    const auto r = run_diff(before.string() + " " + after.string() + " -o diff.txt");
    CHECK(r.rc == 2);
    CHECK(r.err.find("diff.txt") != std::string::npos);
    const auto opt = run_diff(before.string() + " " + after.string() + " -o --x.md");
    CHECK(opt.rc == 2);
    CHECK(opt.err.find("-o --x.md: is an option") != std::string::npos);
    CHECK_FALSE(fs::exists("--x.md"));
  }
}

// iscope-diff and iscope-analyze run one analysis (tools/common/analysis_entry.hpp): given the same dump, the
// comparison's BEFORE side holds the findings the report holds, with the same titles and the same primary. The
// launcher of a two-rank run is the case they used to differ on: its own findings (its idle loop) are taken out once
// its ranks beside it are read, which iscope-diff did not do.
TEST_CASE("iscope-diff and iscope-analyze describe one dump alike") {
  for (const char* name : {"mg_comm_bound.iscope", "llm_decode_item.iscope", "mt_cv_server.iscope"}) {
    CAPTURE(name);
    const fs::path dump = fs::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures" / name;
    const fs::path report = work_dir() / "agree.report.json", diff = work_dir() / "agree.diff.json";
    const std::string analyze_cmd = std::string(ISCOPE_ANALYZE_EXE) + " " + dump.string() + " --json " +
                                    report.string() + " > /dev/null 2>&1";
    REQUIRE(std::system(analyze_cmd.c_str()) == 0);
    const Run r = run_diff(dump.string() + " " + dump.string() + " --json " + diff.string());
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    const boost::json::object a = boost::json::parse(read(report)).as_object();
    const boost::json::object d = boost::json::parse(read(diff)).as_object();
    std::vector<std::string> in_report, in_diff;
    std::string primary_report, primary_diff;
    for (const auto& f : a.at("findings").as_array()) {
      const auto& o = f.as_object();
      const std::string category(o.at("bottleneck_type").as_string());  // the report's name for the category
      in_report.push_back(category + ": " + std::string(o.at("title").as_string()));
      if (o.at("primary").as_bool()) primary_report = category;
    }
    for (const auto& f : d.at("findings").as_array()) {
      const auto& o = f.as_object();
      CHECK(o.at("change").as_string() == "unchanged");
      in_diff.push_back(std::string(o.at("category").as_string()) + ": " + std::string(o.at("title_before").as_string()));
      if (o.at("primary_before").as_bool()) primary_diff = std::string(o.at("category").as_string());
    }
    std::sort(in_report.begin(), in_report.end());
    std::sort(in_diff.begin(), in_diff.end());
    CHECK(in_report == in_diff);
    CHECK(primary_report == primary_diff);
    if (std::string(name) == "mg_comm_bound.iscope") {
      CHECK(a.at("run").as_object().at("launcher").as_bool());  // what the case is about: a launcher, its ranks beside
      CHECK(in_diff.empty());
      // Its headline is the run's step, and so is the latency compared: the slowest rank's matched steps, whose mean
      // is the report's run step; the comparison says so.
      bool noted = false;
      for (const auto& n : d.at("notes").as_array())
        noted |= std::string(n.as_string()).find("is the launcher of a run of 2 ranks: the latency compared is the run's "
                                                 "step") != std::string::npos &&
                 std::string(n.as_string()).find(", the slowest") != std::string::npos;
      CHECK(noted);
      const auto& side = d.at("latency").as_object().at("before").as_object();
      CHECK(side.at("step").as_string() == "the run's step");
      CHECK(side.at("count").to_number<double>() == a.at("run").as_object().at("steps_matched").to_number<double>());
      CHECK(side.at("mean_ms").to_number<double>() ==
            doctest::Approx(a.at("run").as_object().at("step_ms").to_number<double>()).epsilon(1e-9));
      // The headline compares means, as the launcher's report heads with the run's mean step.
      CHECK(d.at("latency").as_object().at("headline_statistic").as_string() == "mean");
    } else {
      CHECK_FALSE(in_diff.empty());
    }
  }
}
