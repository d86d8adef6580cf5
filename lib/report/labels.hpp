// The words the reports use for the analyzer's keys, and what their first screen says: a finding's category
// in words ("Waiting (sleep, I/O, a queue)" for `wait`), a metric's label and value with its unit ("Run-queue wait
// share: 0.0 %" for runqueue_wait_share = 0), whether the data-quality notes need reading, and the first thing
// to do. The JSON report keeps the keys; Markdown and HTML show these words (HTML has the key on hover).
#pragma once

#include "analyze/analysis.hpp"

#include <string>
#include <string_view>

namespace inferscope::report {

/// Whether `key` names a built-in category (analyze::kCategories or kRunCategories). A constant expression, so
/// that a list of some categories elsewhere in the reports is checked against the one list when it compiles.
constexpr bool is_category(std::string_view key) {
  for (const char* c : analyze::kCategories)
    if (key == c) return true;
  for (const char* c : analyze::kRunCategories)
    if (key == c) return true;
  return false;
}

/// A finding category (analyze::kCategories, "custom:<rule>", or a breakdown cause key such as "unattributed")
/// in words; an unknown key is returned as it is.
std::string category_name(std::string_view category);

/// A metric's key in words, its unit in parentheses where the key names one: "runqueue_wait_share" ->
/// "run-queue wait share (%)", "h2d_bytes_per_step" -> "host-to-device bytes per step".
std::string metric_label(std::string_view key);

/// A metric's value as its label promises: a share (0..1) as a percentage, bytes with a binary unit, times and
/// other numbers as fmt_value.
std::string metric_value(std::string_view key, double v);

/// Why the data-quality notes must be read before the numbers, or "" when nothing is wrong. Wrong means any of:
/// the input is corrupt (partial), the analyzer warned (other than to say how it found the steps), clock
/// alignment was measured and is suspect, records were dropped, or the dump has no END chunk (so drops are not
/// known). "No steps found", a step found automatically and warm-up steps left out are facts about the run, not
/// problems with its data: they are said in the headline instead.
std::string quality_problem(const analyze::Analysis& a);

/// True for the analyzer's note on how it found the steps of a program that marks none (lib/analyze/steps.cpp:
/// "no repeated top-level range: the steps are the calls of ...", the loop iterations ending at a sync, the whole
/// trace). Such a note says what the step is, which the headline names too; a report that called it a data-quality
/// problem would open its warnings for almost every unannotated program and teach readers to skip them.
bool is_step_detection_note(std::string_view warning);

/// How the reports label one of the analyzer's warnings that is a note about how the report was made, not a doubt
/// about its numbers: "How the steps were found" (is_step_detection_note), "The timeline" (the representative step
/// drawn cut, lib/analyze/timeline.cpp: every figure is still of every span). "" for a warning proper.
std::string note_label(std::string_view warning);

/// The one suggestion to try first from a finding: the one with the largest estimated saving above zero; when
/// none has one, the first (by the analyzer's order). nullptr when the finding has no suggestion.
const analyze::Suggestion* first_suggestion(const analyze::Finding& f);

/// A suggestion's saving in words: "saves about 1.234 ms per step", "no saving estimated for this trace"
/// (estimated at under 1 us), "saving not estimated".
std::string saving_text(const analyze::Suggestion& s, const std::string& per = "step");
/// "3.000 ms per step (12.0 % of the step)", or per request for a finding about an asyncio service's requests.
std::string impact_text(const analyze::Finding& f);

/// What to do first: the suggestion with the largest estimated saving among the causes that cost the same unit as
/// `primary` (per step, or per request), whichever finding it belongs to (a GEMM padded saves more than the
/// busy-GPU finding's own advice; one transfer per step is ranked against a CUDA graph by its saving); the primary's
/// first suggestion when none is estimated. `from` is the finding it belongs to.
struct DoFirst {
  const analyze::Suggestion* suggestion = nullptr;
  const analyze::Finding* from = nullptr;
};
DoFirst do_first(const analyze::Analysis& a, const analyze::Finding& primary);

/// The primary finding the first screen reports: the run's (several ranks) before this process's; nullptr when
/// there is none or this process is a launcher without findings of its own.
const analyze::Finding* headline_finding(const analyze::Analysis& a);

}  // namespace inferscope::report
