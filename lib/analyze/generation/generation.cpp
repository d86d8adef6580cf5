// Stage "generation", its parts that read no dump: which call is the per-token one (token_function) and what each
// token costs (measure_generation). generation_calls.cpp collects the Python calls they read.
#include "analyze/generation/generation.hpp"

#include "analyze/support/order_stats.hpp"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace inferscope::analyze::detail {
namespace {

// One function's outermost calls inside the windows.
struct Candidate {
  uint32_t code = 0;
  uint32_t depth = UINT32_MAX;          // shallowest call
  int64_t covered = 0;                  // time its outermost calls cover
  size_t calls = 0, launching = 0;      // outermost calls; those holding a CUDA launch
  std::vector<std::vector<Span>> by_window;
};

long window_of(const std::vector<Span>& windows, int64_t start, int64_t end) {
  auto it = std::upper_bound(windows.begin(), windows.end(), start, [](int64_t v, const Span& w) { return v < w.start; });
  if (it == windows.begin()) return -1;
  --it;
  return start >= it->start && end <= it->end ? long(it - windows.begin()) : -1;
}

bool holds_launch(std::span<const int64_t> launch_starts, int64_t start, int64_t end) {
  auto it = std::lower_bound(launch_starts.begin(), launch_starts.end(), start);
  return it != launch_starts.end() && *it < end;
}

// Groups the calls by function, keeps each function's outermost calls (a recursive or re-entered call inside
// another call of the same function is part of it) and places them in their windows.
std::vector<Candidate> candidates_of(std::span<const CallSpan> calls, const std::vector<Span>& windows,
                                     std::span<const int64_t> launch_starts) {
  std::vector<uint32_t> order(calls.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    // Equal starts (torch.profiler's microseconds): the longer, outer call first, so the inner one nests in it.
    if (calls[a].code != calls[b].code) return calls[a].code < calls[b].code;
    return calls[a].start != calls[b].start ? calls[a].start < calls[b].start : calls[a].end > calls[b].end;
  });
  std::vector<Candidate> out;
  int64_t open_end = 0;
  for (uint32_t i : order) {
    const CallSpan& c = calls[i];
    if (out.empty() || out.back().code != c.code) {
      out.push_back({.code = c.code, .by_window = std::vector<std::vector<Span>>(windows.size())});
      open_end = INT64_MIN;
    }
    Candidate& k = out.back();
    k.depth = std::min(k.depth, c.depth);
    if (c.start < open_end) continue;  // inside an outer call of the same function
    open_end = c.end;
    const long w = window_of(windows, c.start, c.end);
    if (w < 0) continue;
    k.by_window[size_t(w)].push_back({c.start, c.end, 0});
    k.covered += c.end - c.start;
    ++k.calls;
    k.launching += holds_launch(launch_starts, c.start, c.end);
  }
  return out;
}

bool repeats_per_token(const Candidate& k, size_t windows) {
  size_t enough = 0;
  for (const auto& v : k.by_window) enough += v.size() >= kMinTokenCalls;
  return windows > 0 && enough * 2 >= windows && k.launching * 2 >= k.calls && k.calls > 0;
}

bool launches_between(std::span<const int64_t> launch_starts, int64_t after, int64_t before) {
  auto it = std::upper_bound(launch_starts.begin(), launch_starts.end(), after);
  return it != launch_starts.end() && *it < before;
}

// A loop over tokens, not over layers or the parts of one forward, where only a function or step name marks it
// (a model class is marker enough). Two signs, both needed: work is launched between consecutive calls outside
// them (the next token is picked from the logits: argmax, sampling, the stop check; consecutive layers launch
// nothing between them), and no function called twice or more in a step holds two or more of the calls (layers
// and projections sit inside blocks called once per layer; tokens sit inside one loop).
bool token_loop_shaped(const Candidate& pick, const std::vector<Candidate>& all, std::span<const int64_t> launch_starts) {
  size_t gaps = 0, with = 0;
  for (const auto& calls : pick.by_window)
    for (size_t i = 0; i + 1 < calls.size(); ++i) {
      ++gaps;
      with += launches_between(launch_starts, calls[i].end, calls[i + 1].start);
    }
  if (gaps == 0 || with * 2 < gaps) return false;
  for (const Candidate& k : all) {
    if (k.code == pick.code) continue;
    for (size_t w = 0; w < k.by_window.size() && w < pick.by_window.size(); ++w) {
      if (k.by_window[w].size() < 2) continue;
      const auto& calls = pick.by_window[w];
      for (const Span& outer : k.by_window[w]) {
        auto lo = std::lower_bound(calls.begin(), calls.end(), outer.start, [](const Span& c, int64_t v) { return c.start < v; });
        auto hi = std::upper_bound(calls.begin(), calls.end(), outer.end, [](int64_t v, const Span& c) { return v < c.start; });
        if (hi - lo >= 2) return false;
      }
    }
  }
  return true;
}

}  // namespace

namespace {

// The per-token call whose class marks it a generating model, when the most-covering per-token call is not: an
// encoder-decoder's model call (T5ForConditionalGeneration.forward, once per token) can cover less than a module
// both the encoder and the decoder run (T5Stack.forward: once more, for the encoder), and a stopping criterion or a
// logits processor called once per token can cover more than the model itself (a host scan of every generated
// token). A class that names a generating model is the model's call however little time it covers; of several, the
// one covering the most. nullptr: none.
const Candidate* class_marked_inside(const std::vector<Candidate>& all,
                                     const std::function<std::string(uint32_t)>& name_of_code, std::string& marker) {
  const Candidate* best = nullptr;
  for (const Candidate& k : all) {
    if (best && k.covered <= best->covered) continue;
    if (std::string m = model_class_marker(name_of_code(k.code)); !m.empty()) {
      best = &k;
      marker = m;
    }
  }
  return best;
}

}  // namespace

std::string generation_marker(const std::string& token_function, const std::string& step_function) {
  if (std::string m = model_class_marker(token_function); !m.empty()) return m;
  if (generating_function(split_qualname(token_function).second)) return "function " + token_function;
  if (!step_function.empty() && generating_function(split_qualname(step_function).second)) return "step " + step_function;
  return "";
}

std::optional<TokenFunction> token_function(std::span<const CallSpan> calls, const std::vector<Span>& windows,
                                            std::span<const int64_t> launch_starts,
                                            const std::function<std::string(uint32_t)>& name_of_code,
                                            const std::string& step_function) {
  const std::vector<Candidate> every = candidates_of(calls, windows, launch_starts);
  std::vector<Candidate> all;
  for (const Candidate& k : every)
    if (repeats_per_token(k, windows.size())) all.push_back(k);
  if (all.empty()) return std::nullopt;
  const Candidate& most = *std::max_element(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    return a.covered != b.covered ? a.covered < b.covered : a.code > b.code;
  });
  // The same calls seen through wrappers: as many outermost calls, nearly the same time. The innermost is the
  // model's own forward; a marker may sit on any of them.
  std::vector<const Candidate*> same;
  for (const Candidate& k : all)
    if (k.calls == most.calls && double(k.covered) >= kWrapperShare * double(most.covered)) same.push_back(&k);
  std::sort(same.begin(), same.end(), [](const Candidate* a, const Candidate* b) {
    return a->depth != b->depth ? a->depth > b->depth : a->code < b->code;
  });
  // The innermost one whose class marks it (GPT2LMHeadModel.forward, not the GPT2Model.forward inside it that
  // leaves out the LM head); else the innermost, marked by its own or the step's name, and shaped like a token loop.
  const Candidate* chosen = nullptr;
  std::string marker;
  for (const Candidate* k : same)
    if (marker = model_class_marker(name_of_code(k->code)); !marker.empty()) {
      chosen = k;
      break;
    }
  if (!chosen) chosen = class_marked_inside(all, name_of_code, marker);
  if (!chosen) {
    chosen = same.front();
    marker = generation_marker(name_of_code(chosen->code), step_function);
    if (!marker.empty() && !token_loop_shaped(*chosen, every, launch_starts)) return std::nullopt;
  }
  if (marker.empty()) return std::nullopt;
  const Candidate& pick = *chosen;
  TokenFunction tf{.code = pick.code, .name = name_of_code(pick.code), .marker = marker, .calls_by_step = pick.by_window};
  for (auto& v : tf.calls_by_step)
    if (v.size() < kMinTokenCalls) v.clear();
  return tf;
}

namespace {

// One token's window and what happened in it.
struct Token {
  int64_t start = 0, end = 0;  // its window on the host
  int64_t call_start = 0, call_end = 0;  // its call
  int64_t gpu_end = 0;         // the end of the GPU work launched in its window (0: none)
  double gpu_ns = 0, kernels = 0, call_kernels = 0, d2d = 0, launch_ns = 0, syncs = 0, call_syncs = 0, sync_ns = 0,
         api_ns = 0;
  bool in_call(int64_t t) const { return t >= call_start && t < call_end; }
  int64_t done() const { return std::max(call_end, gpu_end); }
};

// The last token's window: its call and the median time the loop spends after a call before the next one (picking
// the token, the stop check), not the rest of the step (the output read back, detokenised, after the loop).
int64_t last_token_end(const std::vector<Span>& calls, int64_t step_end) {
  std::vector<double> after;
  for (size_t i = 0; i + 1 < calls.size(); ++i) after.push_back(double(calls[i + 1].start - calls[i].end));
  const int64_t end = calls.back().end + int64_t(median_in_place(after));
  return std::min(step_end, std::max(end, calls.back().end));
}

// The tokens of every step with calls, in time order; `first_token[s]` is step s's first token (or -1).
std::vector<Token> token_windows(const TokenFunction& tf, const std::vector<Span>& windows, std::vector<long>& first_token) {
  std::vector<Token> out;
  first_token.assign(windows.size(), -1);
  for (size_t s = 0; s < windows.size() && s < tf.calls_by_step.size(); ++s) {
    const auto& calls = tf.calls_by_step[s];
    if (calls.empty()) continue;
    first_token[s] = long(out.size());
    const int64_t last_end = last_token_end(calls, windows[s].end);
    for (size_t i = 0; i < calls.size(); ++i) {
      const int64_t start = i == 0 ? windows[s].start : calls[i].start;
      const int64_t end = i + 1 < calls.size() ? calls[i + 1].start : last_end;
      out.push_back({.start = start, .end = end, .call_start = calls[i].start, .call_end = calls[i].end});
    }
  }
  return out;
}

long token_at(const std::vector<Token>& tokens, int64_t t) {
  auto it = std::upper_bound(tokens.begin(), tokens.end(), t, [](int64_t v, const Token& k) { return v < k.start; });
  if (it == tokens.begin()) return -1;
  --it;
  return t < it->end ? long(it - tokens.begin()) : -1;
}

void add_host_calls(std::vector<Token>& tokens, std::span<const ApiOp* const> step_calls) {
  for (const ApiOp* a : step_calls) {
    const long k = token_at(tokens, a->start);
    if (k < 0) continue;
    Token& t = tokens[size_t(k)];
    t.api_ns += a->dur;
    if (a->kind == kLaunch) t.launch_ns += a->dur;
    if (a->kind == kSync || a->kind == kCopySync) {
      ++t.syncs;
      t.call_syncs += t.in_call(a->start);
      t.sync_ns += a->dur;
    }
  }
}

void add_gpu_work(std::vector<Token>& tokens, std::span<const GpuOp> gpu,
                  const std::function<const ApiOp*(uint32_t)>& launch_of, uint32_t step_thread) {
  const uint16_t thread = uint16_t(std::min<uint32_t>(step_thread, 0xffff));
  for (const GpuOp& op : gpu) {
    const ApiOp* launch = launch_of(op.corr);
    if (!launch || launch->thread != thread) continue;
    const long k = token_at(tokens, launch->start);
    if (k < 0) continue;
    Token& t = tokens[size_t(k)];
    t.gpu_end = std::max(t.gpu_end, op.end());
    t.gpu_ns += op.dur;
    t.kernels += is_kernel(op.kind);
    t.call_kernels += is_kernel(op.kind) && t.in_call(launch->start);
    t.d2d += op.kind == kOtherCopy;
  }
}

// The phase's per-token figures from its tokens' times (ns) and tokens.
GenerationPhase phase_of(std::vector<double> times_ns, const std::vector<const Token*>& tokens) {
  GenerationPhase p;
  p.tokens = tokens.size();
  if (tokens.empty()) return p;
  std::sort(times_ns.begin(), times_ns.end());
  p.token_ms_p90 = percentile_sorted(times_ns, 0.9) / 1e6;
  p.token_ms = median_in_place(times_ns) / 1e6;
  const double n = double(tokens.size());
  for (const Token* t : tokens) {
    p.gpu_ms += t->gpu_ns / 1e6 / n;
    p.kernels += t->kernels / n;
    p.call_kernels += t->call_kernels / n;
    p.call_syncs += t->call_syncs / n;
    p.launch_ms += t->launch_ns / 1e6 / n;
    p.syncs += t->syncs / n;
    p.sync_ms += t->sync_ns / 1e6 / n;
    p.d2d_copies += t->d2d / n;
    p.host_ms += std::max(0.0, double(t->end - t->start) - t->api_ns) / 1e6 / n;
  }
  return p;
}

}  // namespace

GenerationLoop measure_generation(const TokenFunction& tf, const std::vector<Span>& windows,
                                  std::span<const ApiOp* const> step_calls, std::span<const GpuOp> gpu,
                                  const std::function<const ApiOp*(uint32_t)>& launch_of, uint32_t step_thread) {
  GenerationLoop g;
  std::vector<long> first;
  std::vector<Token> tokens = token_windows(tf, windows, first);
  if (tokens.empty()) return g;
  add_host_calls(tokens, step_calls);
  add_gpu_work(tokens, gpu, launch_of, step_thread);

  std::vector<double> ttft, tpot, per_step_tokens, rate;
  std::vector<const Token*> prefill, decode;
  for (size_t s = 0; s < windows.size(); ++s) {
    if (first[s] < 0) continue;
    const size_t n = tf.calls_by_step[s].size();
    const Token* t = &tokens[size_t(first[s])];
    int64_t done = std::max(t[0].done(), windows[s].start);
    ttft.push_back(double(done - windows[s].start));
    prefill.push_back(&t[0]);
    for (size_t i = 1; i < n; ++i) {
      const int64_t next = std::max(t[i].done(), done);  // a token launching nothing is done when the one before is
      tpot.push_back(double(next - done));
      decode.push_back(&t[i]);
      done = next;
    }
    per_step_tokens.push_back(double(n));
    if (done > windows[s].start) rate.push_back(double(n) * 1e9 / double(done - windows[s].start));
  }
  g.detected = true;
  g.token_function = tf.name;
  g.marker = tf.marker;
  g.steps = per_step_tokens.size();
  g.tokens_per_step = median_in_place(per_step_tokens);
  g.tokens_per_s = median_in_place(rate);
  g.prefill = phase_of(ttft, prefill);
  g.decode = phase_of(tpot, decode);
  g.ttft_ms = g.prefill.token_ms;
  g.ttft_ms_p90 = g.prefill.token_ms_p90;
  g.tpot_ms = g.decode.token_ms;
  g.tpot_ms_p90 = g.decode.token_ms_p90;
  if (g.steps < windows.size())
    g.notes.push_back(std::to_string(windows.size() - g.steps) + " of the " + std::to_string(windows.size()) +
                      " steps measured called " + tf.name + " fewer than " + std::to_string(kMinTokenCalls) +
                      " times and are left out");
  return g;
}

}  // namespace inferscope::analyze::detail
