// live_replay DUMP: feeds a recording to the live tap chunk by chunk, in the order the session's writer drained
// them, and prints what the live server would serve at the end: /data's "serving" part on the first line, then
// /metrics. How the serving metrics (docs/live.md, "Serving metrics") were checked against real programs' own
// timers from GPU recordings, without a live server on the GPU machine (it has no cpp-httplib).
#include "dump/reader.hpp"
#include "live/render.hpp"
#include "live/render_serving.hpp"
#include "live/tap.hpp"

#include <cstdio>
#include <exception>
#include <vector>

using namespace inferscope;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: live_replay DUMP\n");
    return 2;
  }
  try {
    const dump::DumpReader r(argv[1]);
    const auto& cal = r.calibration();
    const double rate = cal.size() >= 2 ? double(cal.back().ticks - cal.front().ticks) /
                                              double(cal.back().monotonic_ns - cal.front().monotonic_ns)
                                        : 1.0;
    live::Tap tap(0, cal.empty() ? 0 : cal.front().ticks, rate, [&](uint32_t id) { return r.string_at(id); });
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
    const live::Snapshot s = tap.snapshot();
    std::printf("%s\n%s", live::serving_json(s).c_str(), live::render_metrics(s).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "live_replay: %s: %s\n", argv[1], e.what());
    return 1;
  }
}
