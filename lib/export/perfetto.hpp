// The Perfetto / Chrome trace of a dump: its records converted record by record (perfetto.cpp), not a report of
// its analysis, which at most names the steps on a track of their own.
//
//   dump::DumpReader r("run.iscope"); std::ofstream tr("trace.json"); exporter::write_perfetto(r, tr);
#pragma once

#include "analyze/analysis.hpp"
#include "dump/reader.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace inferscope::exporter {

/// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing), streamed record by record so
/// memory stays bounded whatever the dump's size. Timestamps are microseconds from the trace's time origin,
/// the one every report of the dump states its times from (dump/trace_bounds.hpp); the few records from before
/// it (counter samples as the session started) are drawn from it. Given the dump's analysis, its steps are a
/// "Steps" track ("step 0 (warm-up)", "step 7 (slow)"). Throws dump::DumpError on a malformed record before
/// writing anything (every record is checked in a first pass that also finds the time origin).
void write_perfetto(const dump::DumpReader& reader, std::ostream& out, const analyze::Analysis* analysis = nullptr);

/// One dump of a run's trace, the label its tracks carry ("rank 1") and, given its analysis's steps, its Steps
/// track.
struct RunTracePart {
  const dump::DumpReader* reader = nullptr;
  std::string label;
  const analyze::StepStats* steps = nullptr;  ///< its steps (none: no Steps track for it)
  uint32_t representative_step = 0;           ///< the step its reports draw
  /// Its host's clock minus the run's reference host's (analyze::HostClock::offset_ms, in ns): subtracted from its
  /// times so that ranks of several hosts share one time line; 0 on one host.
  int64_t clock_offset_ns = 0;
};
/// The dumps of one multi-process run (the ranks of a torchrun job) as one trace: one time line (the processes of
/// one host share CLOCK_MONOTONIC; another host's are moved by their part's clock_offset_ns), each process and each of its GPUs a lane named with its label, flow arrows
/// kept within their process; each process with steps has its own Steps track on that time line. One part writes
/// what write_perfetto writes.
void write_perfetto_run(const std::vector<RunTracePart>& parts, std::ostream& out);

}  // namespace inferscope::exporter
