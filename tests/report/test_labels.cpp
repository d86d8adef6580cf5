// labels.hpp: the words the reports use for the analyzer's keys, and the first screen's choices.
#include "report/common.hpp"
#include "report/html_parts.hpp"
#include "report/labels.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::report;

TEST_CASE("labels: every built-in category has words of its own") {
  for (const char* c : analyze::kCategories) {
    CAPTURE(c);
    CHECK(category_name(c) != c);
    CHECK(category_name(c).find('_') == std::string::npos);
  }
  CHECK(category_name("wait") == "Waiting by its own choice (sleep, I/O, a queue)");
  CHECK(category_name("custom:slow_tokenizer") == "Custom rule slow_tokenizer");
  CHECK(category_name("collective_wait") == "Ranks waiting for a slower rank in collectives");  // a run's
  CHECK(category_name("something_new") == "something_new");  // unknown: as it is, not hidden
}

TEST_CASE("labels: each cause of the breakdown is a category, in words and in a colour of its own") {
  // Every branch of cause_rows: GPU work, collectives (a rank's gpu_comm_ms) and a gap the parts leave.
  analyze::Breakdown b;
  b.step_ms = 100;
  b.gpu_comm_ms = 1;
  const std::vector<BreakdownRow> rows = cause_rows(b, true);
  std::set<std::string> colours;
  for (const BreakdownRow& r : rows) {
    CAPTURE(r.key);
    if (std::string_view(r.key) == "unattributed") continue;  // the gap: no category, grey on purpose
    CHECK(is_category(r.key));
    CHECK(category_name(r.key) != r.key);
    CHECK(std::string(html::breakdown_color(r.key)) != html::kUnknownBreakdownColor);
    CHECK(colours.insert(html::breakdown_color(r.key)).second);  // two causes never share a colour
  }
  CHECK(rows.back().key == std::string("unattributed"));
  CHECK(colours.size() + 1 == rows.size());
  CHECK_FALSE(is_category("unattributed"));
  CHECK(is_category("collective_wait"));
}

TEST_CASE("labels: metric keys in words, with the unit their value is shown in") {
  CHECK(metric_label("runqueue_wait_share") == "Run-queue wait share (%)");
  CHECK(metric_value("runqueue_wait_share", 0) == "0.0");
  CHECK(metric_value("runqueue_wait_share", 0.256) == "25.6");
  CHECK(metric_label("launch_api_ms_per_step") == "Launch API per step (ms)");
  CHECK(metric_label("h2d_bytes_per_step") == "Host-to-device bytes per step");
  CHECK(metric_value("h2d_bytes_per_step", 3 * 1024 * 1024) == "3.1 MB");  // decimal, as the analyzer's "3.1 MB"
  CHECK(metric_value("h2d_bytes_per_step", 3e6) == "3.0 MB");
  CHECK(metric_value("h2d_bytes_per_step", 512) == "512 B");
  CHECK(metric_value("h2d_bytes_per_step", 1.5e9) == "1.50 GB");
  CHECK(metric_label("median_kernel_us") == "Median kernel (us)");
  CHECK(metric_label("peak_bandwidth_gbps") == "Peak bandwidth (GB/s)");
  CHECK(metric_value("kernels_per_step", 412) == "412");
  CHECK(metric_value("gpu_utilization", 1.7) == "1.7");  // not a fraction after all: the number as it is
}

TEST_CASE("labels: the data-quality notes are wrong only for what makes the numbers doubtful") {
  analyze::Analysis a;
  a.complete = true;
  CHECK(quality_problem(a).empty());
  a.steps.warmup = 3;  // facts about the run, not problems with its data
  CHECK(quality_problem(a).empty());
  a.gpu_work_recorded = true;
  a.alignment.kernels_checked = 10;
  a.alignment.ok = false;
  CHECK(quality_problem(a) == "CPU and GPU clocks look misaligned");
  a.alignment.ok = true;
  a.drops = {{"buffer_full", 3}};
  CHECK(quality_problem(a) == "records were dropped while recording");
  a.drops.clear();
  a.complete = false;
  CHECK(!quality_problem(a).empty());
  a.warnings = {"w1", "w2"};
  CHECK(quality_problem(a) == "2 warnings");
  a.partial = true;
  CHECK(quality_problem(a).find("corrupt") != std::string::npos);
}

TEST_CASE("labels: what to do first is the largest estimated saving, never one that saves nothing") {
  analyze::Finding f;
  CHECK(first_suggestion(f) == nullptr);
  f.suggestions = {{"a", "high", 0.0, true, "m"}, {"b", "medium", 0.4, true, "m"}, {"c", "low", 0.9, true, "m"},
                   {"d", "high", 0.0, false, ""}};
  CHECK(first_suggestion(f)->action == "c");
  CHECK(saving_text(f.suggestions[0]) == "no saving estimated for this trace");
  CHECK(saving_text(f.suggestions[2]) == "saves about 0.90 ms per step");  // as the analyzer writes 0.90 ms
  CHECK(saving_text(f.suggestions[3]) == "saving not estimated");
  f.suggestions = {{"a", "high", 0.0, true, "m"}, {"d", "high", 0.0, false, ""}};
  CHECK(first_suggestion(f)->action == "a");  // none saves anything: the analyzer's first
}
