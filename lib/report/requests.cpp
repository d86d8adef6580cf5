// The requests' text for the Markdown and HTML reports (requests.hpp).
#include "report/requests.hpp"

#include "report/escape.hpp"

#include <algorithm>
#include <utility>

namespace inferscope::report {
namespace {

// The parts of a request's latency, largest first, leaving out those under 0.05 % of it (a zero row is noise).
std::vector<std::pair<std::string, double>> parts(const analyze::Requests& r) {
  const auto& s = r.split;
  std::vector<std::pair<std::string, double>> v = {
      {"in its batch step", s.in_batch_ms},
      {"waiting for its batch (no step running)", s.batch_wait_ms},
      {"queued behind earlier batches", s.queued_ms},
      {"delayed by other callbacks holding the loop", s.delayed_ms},
      {"its own code on the loop", s.running_ms},
      {r.batched ? "awaiting anything else (I/O, a sleep, a client)" : "awaiting (I/O, the GPU, a sleep, a client)", s.other_ms},
  };
  std::erase_if(v, [&](const auto& p) { return p.second <= 0.0005 * r.mean_ms; });
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

// The engine's batches: a sentence, and the step time by batch size.
void engine_text(const analyze::EngineBatches& e, RequestsText& t) {
  if (!e.by_batch.empty())
    t.engine = "Step time against batch size: about " + fmt(e.fixed_ms, 3) + " ms per step plus " +
               fmt(e.per_request_ms, 3) + " ms per request in the batch (a least-squares line over the steps; it " +
               "explains " + fmt(e.fit_r2 * 100, 0) + " % of their variance).";
  if (e.streamed)
    t.engine += std::string(t.engine.empty() ? "" : " ") + std::to_string(e.streamed_requests) +
                " requests streamed their output over " + fmt(e.steps_per_request, 1) +
                " engine steps each (continuous batching): time to first token (its start to the end of its first "
                "step) p50 " + fmt(e.ttft_p50_ms, 3) + " ms, p90 " + fmt(e.ttft_p90_ms, 3) +
                " ms; time per output token (between its later steps) p50 " + fmt(e.tpot_p50_ms, 3) + " ms, p90 " +
                fmt(e.tpot_p90_ms, 3) + " ms.";
  if (e.by_batch.empty()) return;
  t.batches = {"batches", "batches", "Step time by batch size",
               {{"batch (requests per step)", CellKind::kWords}, {"steps"}, {"mean batch"}, {"mean step ms"},
                {"p50 step ms"}},
               {}, {}};
  for (const auto& r : e.by_batch)
    t.batches.rows.push_back({words_cell(r.batch), words_cell(std::to_string(r.steps)), words_cell(fmt(r.mean_batch, 1)),
                              words_cell(fmt(r.mean_ms, 3)), words_cell(fmt(r.p50_ms, 3))});
}

}  // namespace

RequestsText requests_text(const analyze::Requests& r) {
  RequestsText t;
  t.summary = std::to_string(r.count) + " requests, each a run of the coroutine " + r.name + " on the event loop (thread " +
              r.loop_thread + ") from its first run to its return: mean " + fmt(r.mean_ms, 3) + " ms, p50 " +
              fmt(r.p50_ms, 3) + ", p90 " + fmt(r.p90_ms, 3) + ", p99 " + fmt(r.p99_ms, 3) + ", max " + fmt(r.max_ms, 3) +
              " ms; " + fmt(r.per_s, 1) + " requests/s. The loop ran callbacks " + fmt(r.loop_busy_share * 100, 1) +
              " % of their span.";
  if (r.batched)
    t.summary += " The steps are the batches that served them, " + fmt(r.requests_per_step, 1) + " requests per batch.";
  t.split = {"request_split", "request-split", "Where a request's time went",
             {{"where a request's time went", CellKind::kWords}, {"ms per request"}, {"share"}},
             {}, {}};
  for (const auto& [name, ms] : parts(r))
    t.split.rows.push_back({words_cell(name), words_cell(fmt(ms, 3)),
                            words_cell(fmt(r.mean_ms > 0 ? ms / r.mean_ms * 100 : 0, 1) + " %")});
  engine_text(r.engine, t);
  t.loop = {"loop_callbacks", "loop-callbacks", "Callbacks on the loop",
            {{"callback on the loop", CellKind::kName}, {"runs"}, {"total ms"}, {"share of the span"}, {"longest ms"},
             {"runs over " + fmt(r.slow_callback_ms, 1) + " ms"}, {"delay per request, ms"}},
            {}, {}};
  for (const auto& c : r.callbacks)
    t.loop.rows.push_back({name_cell(c.name), words_cell(std::to_string(c.runs)), words_cell(fmt(c.total_ms, 3)),
                           words_cell(fmt(c.share * 100, 1) + " %"), words_cell(fmt(c.max_ms, 3)),
                           words_cell(std::to_string(c.slow)), words_cell(fmt(c.delay_ms, 3))});
  t.notes = r.notes;
  t.notes.push_back(
      r.batched ? "A request's suspensions are split by the step that ended last before it resumed (the batch that "
                  "served it): before that step, time while other batches ran is queued, time while none ran is the "
                  "batching wait; after it ended, until the request resumed, the loop was running other callbacks."
                : "No step served the requests (no batch step ended right before they resumed): a suspension counts as "
                  "delayed for the time another callback held the loop longer than " + fmt(r.slow_callback_ms, 1) +
                  " ms (a tenth of the median request, at least 1 ms), the rest as awaiting.");
  return t;
}

std::string requests_headline(const analyze::Requests& r) {
  std::string line = std::to_string(r.count) + " requests of " + r.name + ": p50 " + fmt(r.p50_ms, 3) + " ms, p90 " +
                     fmt(r.p90_ms, 3) + " ms, p99 " + fmt(r.p99_ms, 3) + " ms";
  const auto v = parts(r);
  if (v.empty()) return line;
  line += "; of the mean " + fmt(r.mean_ms, 3) + " ms, ";
  for (size_t i = 0; i < v.size() && i < 3; ++i) line += (i ? ", " : "") + fmt(v[i].second, 3) + " ms " + v[i].first;
  return line;
}

}  // namespace inferscope::report
