// The serving part of what the live server sends (docs/live.md, "Serving metrics"): generation calls and requests
// as the serving meter measured them (serving_meter.hpp). Pure functions of the snapshot, used by render.cpp. Each
// says "nothing of the kind seen" by leaving its part out, never by zeros.
#pragma once

#include "live/tap.hpp"

#include <string>

namespace inferscope::live {

/// /data's "serving": {"generation": {...} or null, "requests": {...} or null}; null when neither was seen.
std::string serving_json(const Snapshot& s);

/// The serving metrics, under the names serving engines use (vLLM's time_to_first_token_seconds,
/// time_per_output_token_seconds, e2e_request_latency_seconds) with the inferscope_ prefix; none when nothing was
/// seen. The request histogram holds the requests when an asyncio service's are seen, else the generation calls.
std::string serving_metrics(const Snapshot& s);

}  // namespace inferscope::live
