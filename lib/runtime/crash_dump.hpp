// Ring, sampled and adaptive modes on abnormal exits (docs/reliability.md, "Ring mode on abnormal exits"): what
// such a session holds in memory is written to a file beside the output from SIGABRT, SIGSEGV and SIGBUS
// handlers, with write(2) alone (no allocation, no lock), then the signal goes on to what the program had
// installed before us.
//
// The writer thread owns the image and changes it only between begin_update() and end_update(). A handler
// first says a crash dump is under way, then waits (briefly) for an update in progress to end; from then on
// begin_update() refuses, so the handler reads memory nobody changes.
#pragma once

#include "runtime/sampling/window_store.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace inferscope::runtime::crash {

/// Everything a ring, sampled or adaptive dump is made of, in file order; END is made by the handler.
struct Image {
  int fd = -1;  ///< the session's preopened file (a temporary); -1: the handler creates `temp` (adaptive mode)
  std::string temp, output;                          ///< renamed temp -> output once written whole
  std::vector<std::vector<uint8_t>> meta;            ///< file header + process info, then new metadata chunks
  const std::deque<std::vector<uint8_t>>* window = nullptr;  ///< retained EVENTS chunks, oldest first
  const sampling::WindowStore* windows = nullptr;  ///< sampled and adaptive modes: the ring of windows' records
  std::vector<uint8_t> sampling;                   ///< then their SAMPLING, WINDOWS and SLOW_STEPS chunks
  std::vector<uint8_t> drops;                        ///< the latest DROPS chunk (may be empty)
  uint64_t records_written = 0, records_dropped = 0;  ///< for END
};

/// Makes `image` the one a crash writes (nullptr: none). Call between begin_update() and end_update().
void arm(Image* image);
/// The writer thread: true when it may change the image; false while a crash dump is written (change nothing).
bool begin_update();
void end_update();
/// Installs the SIGABRT, SIGSEGV and SIGBUS handlers (once per process; each remembers what it replaced).
void install_handlers();
/// A forked child: the dispositions the handlers replaced come back, and no image is armed.
void restore_in_child();

}  // namespace inferscope::runtime::crash
