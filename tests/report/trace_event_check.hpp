// A checker of the Chrome Trace Event Format as Perfetto's JSON importer reads it, for the tests of the Perfetto
// writer on real dumps. It reports every violation it finds, each naming the event:
// - no key twice in any object (otherData and every event's args included): a reader keeps an arbitrary one;
// - every event has "ph" and "pid", every event but metadata a finite "ts" >= 0, a complete event a "dur" >= 0;
// - flows: per (cat, name, id), exactly one start ("s") and one finish ("f");
// - counters ("C"): numeric args, and each track (pid, name, arg key) strictly forward in time in file order;
// - "B"/"E" balanced per (pid, tid), an end not before its begin; async "b"/"e" balanced per (pid, cat, id, name).
//
//   TraceCheck c = check_trace_events(text);
//   CHECK(c.violations.empty());
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::report::testing {

struct TraceCheck {
  std::vector<std::string> violations;  ///< the first kMaxListed, each a sentence naming the event
  size_t violation_count = 0;           ///< all of them
  size_t events = 0, flows = 0, counter_tracks = 0, counter_samples = 0;
  static constexpr size_t kMaxListed = 50;
};

/// Checks a whole trace-event JSON document (see above).
TraceCheck check_trace_events(std::string_view json);

}  // namespace inferscope::report::testing
