// The serving part of /data and /metrics (render_serving.hpp).
#include "live/render_serving.hpp"

#include "live/render.hpp"
#include "live/render_util.hpp"

namespace inferscope::live {

namespace {

std::string quantiles_ms(const char* key, const LatencyHistogram& h) {
  return std::string(",\"") + key + "_p50_ms\":" + num(h.recent_quantile(0.5) * 1e3) + ",\"" + key +
         "_p90_ms\":" + num(h.recent_quantile(0.9) * 1e3);
}

std::string generation_json(const ServingView& v) {
  if (v.generation_calls == 0) return "null";
  const double seconds = v.generation_latency.sum;
  return "{\"calls\":" + std::to_string(v.generation_calls) + ",\"tokens\":" + std::to_string(v.tokens) +
         ",\"function\":" + json_string(v.generation_name) + ",\"token_function\":" + json_string(v.token_name) +
         quantiles_ms("ttft", v.ttft) + quantiles_ms("tpot", v.tpot) + quantiles_ms("latency", v.generation_latency) +
         ",\"tokens_per_s\":" + num(seconds > 0 ? double(v.tokens) / seconds : 0) + "}";
}

std::string requests_json(const ServingView& v) {
  if (v.request_name.empty()) return "null";
  const LatencyHistogram& h = v.request_latency;
  return "{\"function\":" + json_string(v.request_name) + ",\"count\":" + std::to_string(h.count) +
         quantiles_ms("latency", h) + ",\"latency_p99_ms\":" + num(h.recent_quantile(0.99) * 1e3) + "}";
}

std::string histogram(const std::string& name, const std::string& help, const LatencyHistogram& h) {
  return histogram_text(name, help, kServingBounds, h.buckets, h.over, h.sum, h.count);
}

// A label value in the text format: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

}  // namespace

std::string serving_json(const Snapshot& s) {
  const ServingView& v = s.serving;
  if (v.generation_calls == 0 && v.request_name.empty()) return "null";
  return "{\"generation\":" + generation_json(v) + ",\"requests\":" + requests_json(v) + "}";
}

std::string serving_metrics(const Snapshot& s) {
  const ServingView& v = s.serving;
  const bool requests = !v.request_name.empty();
  if (v.generation_calls == 0 && !requests) return "";
  std::string o = "# HELP inferscope_serving_info What the serving metrics measure: the request coroutine, the "
                  "generation call and its per-token model call (1 for the current ones).\n"
                  "# TYPE inferscope_serving_info gauge\n";
  o += "inferscope_serving_info{request=\"" + label(v.request_name) + "\",generation=\"" + label(v.generation_name) +
       "\",token=\"" + label(v.token_name) + "\",request_source=\"" + (requests ? "asyncio" : "generation") + "\"} 1\n";
  if (v.generation_calls) {
    o += histogram("inferscope_time_to_first_token_seconds",
                   "Time from a generation call's start to the end of its first model call (the first token).", v.ttft);
    o += histogram("inferscope_time_per_output_token_seconds",
                   "Time between consecutive tokens' model calls of one generation call (each token after the first).",
                   v.tpot);
    o += "# HELP inferscope_generation_tokens_total Tokens (model calls) of the generation calls seen.\n"
         "# TYPE inferscope_generation_tokens_total counter\n"
         "inferscope_generation_tokens_total " + std::to_string(v.tokens) + "\n";
  }
  o += histogram("inferscope_e2e_request_latency_seconds",
                 requests ? "Each request's latency: its coroutine's first run to its return, on the event loop."
                          : "Each generation call's latency, from its start to its return (no asyncio requests seen).",
                 requests ? v.request_latency : v.generation_latency);
  return o;
}

}  // namespace inferscope::live
