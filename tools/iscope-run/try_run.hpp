// The measurement behind `iscope-run --try` (docs/try.md, "The protocol"): paired processes, the baseline and the
// tried settings, in ABBA order round after round; each process recorded and its steady steps measured by the
// analyzer; the saving per pair, its median and an interval. The processes and the analysis are functions handed
// in, so the protocol itself is unit-tested without running anything.
//
//   TryOutcome o = run_try(knobs, rounds, run_process, measure);
#pragma once

#include "try_knobs.hpp"

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace iscope_run {

/// Pairs run by default: with 5 pairs the range of their savings holds the true median saving with 94 %
/// confidence, whatever the distribution (each pair falls either side of the median with probability one half:
/// 1 - 2 * 0.5^5), and 10 processes of a program whose steady part takes ~10 s fit in a few minutes.
inline constexpr int kDefaultTryRounds = 5;

/// What the analysis of one process's dump gives the protocol.
struct Measured {
  bool ok = false;             ///< false: no steps found (error says why)
  std::string error;
  std::string step;            ///< the step's name, as the analyzer found it (every process must find the same)
  double step_ms = 0;          ///< the median steady step
  size_t steps = 0;            ///< steady steps measured
  std::set<std::string> facts; ///< program facts (lib/analyze/program_facts.hpp)
  bool try_applied = false;    ///< the dump holds an "inferscope.try" mark: a Python knob took effect
  double predicted_ms = 0;     ///< the report's predicted saving for the knob tried (0: none offered)
  std::string predicted_by;    ///< the suggestion that predicted it
};

struct TryProcess {
  bool tried = false;
  int round = 0;
  int status = 0;  ///< the program's exit status (iscope-run's)
  std::string dump;
  Measured m;
};

struct TryOutcome {
  std::string refused;  ///< non-empty: the knob does not apply, or a process failed; said instead of a result
  std::string step;
  std::vector<TryProcess> processes;
  size_t pairs = 0;
  double base_ms = 0, tried_ms = 0;   ///< medians over the processes of their median steps
  double saving_pct = 0;              ///< median over the pairs of 1 - tried/base, in percent
  double low_pct = 0, high_pct = 0;   ///< the pairs' smallest and largest saving
  double noise_pct = 0;               ///< the baseline processes' spread: (max - min) / median, in percent
  bool measurable = false;            ///< the interval excludes 0
  double predicted_ms = 0;            ///< the baseline report's predicted saving (0: none)
  std::string predicted_by;
};

/// Runs one process with `env` added to the baseline's, recording into `dump`; returns its exit status.
using RunProcess = std::function<int(const std::vector<std::pair<std::string, std::string>>& env, const std::string& dump)>;
/// Analyses a dump (its step found as iscope-analyze finds it), the knob tried named for the prediction.
using MeasureDump = std::function<Measured(const std::string& dump, const std::string& knob)>;

/// The protocol: round r runs baseline then tried when r is even, tried then baseline when odd. Every process must
/// find the same step (else `refused` says so). After the first pair it checks the knobs apply (refusal() on the baseline's facts; a Python knob's mark in the tried dump) and
/// stops with `refused` set otherwise. `dump_of(tried, round)` names each process's dump.
TryOutcome run_try(const std::vector<TriedKnob>& knobs, int rounds, const RunProcess& run, const MeasureDump& measure,
                   const std::function<std::string(bool tried, int round)>& dump_of);

/// The outcome in words, for stderr: the step, both medians, the saving with its interval or "no measurable
/// change", the host's noise, and the report's prediction beside it.
std::string describe_outcome(const std::vector<TriedKnob>& knobs, const TryOutcome& o);

/// The outcome as JSON (docs/try.md, "The result file").
std::string outcome_json(const std::vector<TriedKnob>& knobs, const TryOutcome& o, const std::string& command);

}  // namespace iscope_run
