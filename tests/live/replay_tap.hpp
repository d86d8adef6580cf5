// A recording fed to a fresh live tap chunk by chunk, in the order the session's writer drained them, with the
// session's tick rate and its Python code names: what the tap would show at the session's end. live_replay.cpp
// prints it; test_live_replay.cpp checks its serving metrics against the programs' own timers.
#pragma once

#include "dump/reader.hpp"
#include "live/tap.hpp"

#include <string>
#include <vector>

namespace inferscope::live {

inline Snapshot replay_to_end(const dump::DumpReader& r) {
  const auto& cal = r.calibration();
  const double rate = cal.size() >= 2 ? double(cal.back().ticks - cal.front().ticks) /
                                            double(cal.back().monotonic_ns - cal.front().monotonic_ns)
                                      : 1.0;
  Tap tap(0, cal.empty() ? 0 : cal.front().ticks, rate, [&](uint32_t id) { return r.string_at(id); });
  tap.set_code_names([&](uint32_t code) {
    auto it = r.code_table().find(code);
    return it == r.code_table().end() ? std::string() : it->second.qualname;
  });
  for (const auto& [id, t] : r.threads()) tap.set_thread_name(id, t.name, t.os_tid);
  std::vector<uint8_t> bytes;
  for (const dump::EventsChunkRef& c : r.event_chunks()) {
    bytes.resize(c.length);
    r.read_at(c.offset, bytes.data(), bytes.size());
    tap.observe(c.thread_id, bytes.data(), bytes.size());
  }
  return tap.snapshot();
}

}  // namespace inferscope::live
