// What the Markdown and HTML reports say about an asyncio service's requests (analyze::Requests): the first
// screen's line, the split of a request's latency and the event loop's callbacks, as plain text and tables of the
// model (detail_tables.hpp) that each writer escapes and lays out.
#pragma once

#include "analyze/analysis.hpp"
#include "report/detail_tables.hpp"

#include <string>
#include <vector>

namespace inferscope::report {

struct RequestsText {
  std::string summary;  ///< one paragraph: what a request is, its latency, the loop's busy share
  DetailTable split;    ///< the parts of a request's latency that are not zero
  std::string engine;   ///< step time against batch size, streamed requests' first token and later tokens ("": none)
  DetailTable batches;  ///< step time by batch size (no rows: none)
  DetailTable loop;     ///< the loop's callbacks, by total time
  std::vector<std::string> notes;
};

/// The text of detected requests (callers check r.detected).
RequestsText requests_text(const analyze::Requests& r);

/// The first screen's line: "512 requests of handle: p50 12.3 ms, p90 20.1 ms, p99 31.0 ms; of the mean 13.0 ms,
/// 5.1 in their batch step, 4.0 waiting for it, 2.2 delayed by other callbacks" (callers check r.detected).
std::string requests_headline(const analyze::Requests& r);

}  // namespace inferscope::report
