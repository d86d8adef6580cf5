// live_replay DUMP: feeds a recording to the live tap chunk by chunk, in the order the session's writer drained
// them, and prints what the live server would serve at the end: /data's "serving" part on the first line, then
// /metrics. How the serving metrics (docs/live.md, "Serving metrics") were checked against real programs' own
// timers from GPU recordings, without a live server on the GPU machine (it has no cpp-httplib).
#include "dump/reader.hpp"
#include "live/render.hpp"
#include "live/render_serving.hpp"
#include "live/tap.hpp"
#include "replay_tap.hpp"

#include <cstdio>
#include <exception>

using namespace inferscope;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: live_replay DUMP\n");
    return 2;
  }
  try {
    const dump::DumpReader r(argv[1]);
    const live::Snapshot s = live::replay_to_end(r);
    std::printf("%s\n%s", live::serving_json(s).c_str(), live::render_metrics(s).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "live_replay: %s: %s\n", argv[1], e.what());
    return 1;
  }
}
