// Stage "wait frames" (waits.hpp): one more walk over the application threads' ranges and Python calls, now that
// the wait pieces are known. For the step thread: which frame it sat in during each piece (its blocking call
// site); for every other thread: what it ran during the pieces, as self time (a frame's overlap with the pieces
// less its children's), and the calls of wait points (wait_points.hpp) that say who woke whom.
//
// A thread's records arrive in the order they end (children before their parents), so its chunks are read in
// file order by one worker; threads are spread over the workers (the result does not depend on how).
#include "analyze/stages.hpp"
#include "analyze/waits/waits.hpp"

namespace inferscope::analyze::detail {

double FrameTime::total_ns() const {
  double t = 0;
  for (auto& [k, v] : py_ns) t += v;
  for (auto& [k, v] : range_ns) t += v;
  return t;
}

namespace {

constexpr size_t kMaxCallsPerThread = 1u << 20;  // wait/wake calls kept per thread (a polling loop can make millions)

// One thread's walk.
struct ThreadWalk {
  uint32_t thread = 0;
  bool step = false;
  FrameTime frames;
  std::vector<double> py_kids, range_kids;  // by depth: the children's overlap with the pieces, not yet consumed
  std::vector<int16_t> best_py_depth, best_range_depth;  // step thread, per piece
  std::vector<uint32_t> piece_py, piece_range;
  std::vector<WaitCall> waits, wakes;
  uint64_t dropped = 0;
};

class FrameWalker {
 public:
  FrameWalker(const Context& cx, const WaitWindows& w, int64_t span_s, int64_t span_e, ThreadWalk& t)
      : cx(cx), w(w), span_s(span_s), span_e(span_e), t(t) {}

  void on(const RangeRecord& rec, const dump::RecordContext& rc) {
    frame(true, rec.name < cx.nstr ? rec.name : 0, rc.aux(), rec.start, rec.end);
  }
  void on(const PyCallRecord& rec, const dump::RecordContext& rc) {
    const int64_t s = cx.clock.to_ns(rec.start), e = std::max(s, cx.clock.to_ns(rec.end));
    frame(false, rec.code, rc.aux(), rec.start, rec.end);
    if (const WaitPoint* p = cx.wait_point(rec.code)) call(*p, rec.code, s, e);
  }

 private:
  // The weighted overlap of [s, e) with the pieces; for the step thread, marks the pieces it covers most of.
  double overlap(int64_t s, int64_t e, bool range, uint32_t id, uint8_t depth) {
    const auto& P = w.pieces;
    auto it = std::upper_bound(P.begin(), P.end(), s, [](int64_t x, const WaitPiece& p) { return x < p.end; });
    double ov = 0;
    for (; it != P.end() && it->start < e; ++it) {
      const int64_t a = std::max(s, it->start), b = std::min(e, it->end);
      if (b <= a) continue;
      ov += double(b - a) * it->blocked;
      if (t.step && 2 * (b - a) >= it->end - it->start) {
        const size_t k = size_t(it - P.begin());
        auto& best = range ? t.best_range_depth : t.best_py_depth;
        if (int16_t(depth) > best[k]) {
          best[k] = int16_t(depth);
          (range ? t.piece_range : t.piece_py)[k] = id;
        }
      }
    }
    return ov;
  }

  void frame(bool range, uint32_t id, uint8_t depth, uint64_t start, uint64_t end) {
    const int64_t s = cx.clock.to_ns(start), e = std::max(s, cx.clock.to_ns(end));
    auto& kids = range ? t.range_kids : t.py_kids;
    if (kids.size() < size_t(depth) + 2) kids.resize(size_t(depth) + 2, 0.0);
    const double ov = (e > span_s && s < span_e) ? overlap(s, e, range, id, depth) : 0.0;
    const double self = std::max(0.0, ov - kids[depth + 1]);
    kids[depth + 1] = 0;
    kids[depth] += ov;
    if (self > 0) (range ? t.frames.range_ns : t.frames.py_ns)[id] += self;
  }

  void call(const WaitPoint& p, uint32_t code, int64_t s, int64_t e) {
    if (e <= span_s || s >= span_e) return;
    const WaitCall c{s, e, t.thread, code, &p};
    if ((p.roles & kWaitRoleWake) && !t.step) keep(t.wakes, c);
    if ((p.roles & kWaitRoleWait) && touches_piece(s, e)) keep(t.waits, c);
  }
  bool touches_piece(int64_t s, int64_t e) const {
    auto it = std::upper_bound(w.pieces.begin(), w.pieces.end(), s, [](int64_t x, const WaitPiece& p) { return x < p.end; });
    return it != w.pieces.end() && it->start < e;
  }
  void keep(std::vector<WaitCall>& v, const WaitCall& c) {
    if (v.size() < kMaxCallsPerThread) v.push_back(c);
    else ++t.dropped;
  }

  const Context& cx;
  const WaitWindows& w;
  const int64_t span_s, span_e;
  ThreadWalk& t;
};

}  // namespace

WaitFrames read_wait_frames(const Context& cx, const WaitWindows& w, uint32_t step_thread, int64_t span_s,
                            int64_t span_e) {
  WaitFrames out;
  out.piece_py.assign(w.pieces.size(), 0);
  out.piece_range.assign(w.pieces.size(), 0);
  // Each application thread's chunks, in file order.
  std::map<uint32_t, std::vector<size_t>> chunks_of;
  std::map<uint32_t, uint64_t> bytes_of;
  for (size_t i = 0; i < cx.chunks.size(); ++i) {
    if (cx.chunk_channel[i]) continue;
    chunks_of[cx.chunks[i].thread_id].push_back(i);
    bytes_of[cx.chunks[i].thread_id] += cx.chunks[i].length;
  }
  std::vector<ThreadWalk> walks;
  for (auto& [thread, v] : chunks_of) {
    ThreadWalk t;
    t.thread = thread;
    t.step = thread == step_thread;
    if (t.step) {
      t.best_py_depth.assign(w.pieces.size(), -1);
      t.best_range_depth.assign(w.pieces.size(), -1);
      t.piece_py.assign(w.pieces.size(), 0);
      t.piece_range.assign(w.pieces.size(), 0);
    }
    walks.push_back(std::move(t));
  }
  // Largest threads first, each worker taking the next one: the work is a few threads' worth at most.
  std::vector<size_t> order(walks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes_of[walks[a].thread] > bytes_of[walks[b].thread]; });
  std::atomic<size_t> next{0};
  run_parallel(std::min<size_t>(cx.W, std::max<size_t>(1, walks.size())), [&](size_t) {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      ThreadWalk& t = walks[order[k]];
      FrameWalker walker(cx, w, span_s, span_e, t);
      for (size_t c : chunks_of[t.thread]) {
        try {
          dump::visit_records(cx.r, cx.chunks[c], walker);
        } catch (const dump::DumpError&) {  // reported by pass 1
        }
      }
    }
  });
  for (ThreadWalk& t : walks) {
    out.calls_dropped += t.dropped;
    if (t.step) {
      out.step = std::move(t.frames);
      out.piece_py = std::move(t.piece_py);
      out.piece_range = std::move(t.piece_range);
      out.step_waits = std::move(t.waits);
    } else {
      if (!t.frames.py_ns.empty() || !t.frames.range_ns.empty()) out.others[t.thread] = std::move(t.frames);
      out.wakes.insert(out.wakes.end(), t.wakes.begin(), t.wakes.end());
      out.other_waits.insert(out.other_waits.end(), t.waits.begin(), t.waits.end());
    }
  }
  auto by_end = [](const WaitCall& a, const WaitCall& b) { return a.end != b.end ? a.end < b.end : a.thread < b.thread; };
  auto by_start = [](const WaitCall& a, const WaitCall& b) { return a.start != b.start ? a.start < b.start : a.thread < b.thread; };
  std::sort(out.wakes.begin(), out.wakes.end(), by_end);
  std::sort(out.other_waits.begin(), out.other_waits.end(), by_start);
  std::sort(out.step_waits.begin(), out.step_waits.end(), by_start);
  return out;
}

}  // namespace inferscope::analyze::detail
