// CornerFilter: the samples of a cumulative counter that are written, and that linear interpolation between the
// written ones stays within twice the tolerance of every sample read.
#include <doctest/doctest.h>

#include "collect/system/corner_filter.hpp"

#include <cmath>
#include <cstdlib>
#include <vector>

using inferscope::sys::CornerFilter;
using inferscope::sys::CounterPoint;

namespace {

struct Run {
  std::vector<CounterPoint> written;
};

Run feed(CornerFilter& f, const std::vector<CounterPoint>& samples, bool flush = true) {
  Run r;
  for (const auto& s : samples)
    if (auto p = f.observe(s.ts, s.v)) r.written.push_back(*p);
  if (flush)
    if (auto p = f.flush()) r.written.push_back(*p);
  return r;
}

// The written series read back the way the analyzer reads it (linear between points, flat outside).
double interpolate(const std::vector<CounterPoint>& w, uint64_t t) {
  if (t <= w.front().ts) return double(w.front().v);
  for (size_t i = 1; i < w.size(); ++i)
    if (t <= w[i].ts)
      return double(w[i - 1].v) + double(w[i].v - w[i - 1].v) * double(t - w[i - 1].ts) / double(w[i].ts - w[i - 1].ts);
  return double(w.back().v);
}

}  // namespace

TEST_CASE("a thread that runs without pause is two points, one that never runs too") {
  CornerFilter busy(50);
  std::vector<CounterPoint> s;
  for (uint64_t t = 0; t <= 100; ++t) s.push_back({1000 + t * 1000, int64_t(t * 1000)});  // rate 1
  Run r = feed(busy, s);
  REQUIRE(r.written.size() == 2);
  CHECK(r.written.front().ts == 1000);
  CHECK(r.written.back().v == 100000);

  CornerFilter idle(50);
  std::vector<CounterPoint> z;
  for (uint64_t t = 0; t <= 100; ++t) z.push_back({t * 1000 + 1, 777});
  CHECK(feed(idle, z).written.size() == 2);
}

TEST_CASE("bursts: a corner at every change of rate, and nothing lost between them") {
  // 2 samples on (rate 1), 3 off, repeated: the GIL holder of a burst-and-sleep thread.
  std::vector<CounterPoint> s;
  int64_t v = 0;
  for (uint64_t t = 0; t < 50; ++t) {
    s.push_back({t * 1000, v});
    if (t % 5 < 2) v += 1000;
  }
  CornerFilter f(50);
  Run r = feed(f, s);
  CHECK(r.written.size() >= 20);   // every burst has a start and an end
  CHECK(r.written.size() < s.size());
  for (const auto& p : s) CHECK(std::fabs(interpolate(r.written, p.ts) - double(p.v)) <= 100.0);
}

TEST_CASE("noise within the tolerance writes nothing; a value going backwards restarts the series") {
  CornerFilter f(100);
  std::vector<CounterPoint> s;
  for (uint64_t t = 1; t <= 20; ++t) s.push_back({t * 10, int64_t(t * 500 + ((t % 2) ? 40 : -40))});
  Run r = feed(f, s, false);
  CHECK(r.written.size() == 1);  // the first sample only: one line fits all the others within 100
  CHECK(f.pending());
  auto p = f.observe(300, 5);     // goes back: written at once, the new anchor
  REQUIRE(p);
  CHECK(p->v == 5);
  CHECK_FALSE(f.pending());
  auto q = f.observe(300, 9);      // the same time as the anchor: written, and the series restarts there
  REQUIRE(q);
  CHECK(f.anchor().v == 9);
}

TEST_CASE("random walks stay within twice the tolerance everywhere") {
  std::srand(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<CounterPoint> s;
    int64_t v = 0;
    uint64_t t = 1;
    for (int i = 0; i < 500; ++i) {
      t += 1 + uint64_t(std::rand() % 3);
      v += (std::rand() % 4 == 0) ? 0 : std::rand() % 1000;
      s.push_back({t, v});
    }
    CornerFilter f(40);
    Run r = feed(f, s);
    for (const auto& p : s) REQUIRE(std::fabs(interpolate(r.written, p.ts) - double(p.v)) <= 80.0 + 1e-6);
  }
}
