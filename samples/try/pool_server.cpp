// pool_server: a C++ batch scorer whose pool size is an environment variable, the kind of setting iscope-run --try
// can change once the program's settings file declares it (docs/try.md, "A program's own knobs"; the declaration
// is samples/try/.inferscope.yaml).
//
// What it does: each step takes a batch of requests and scores every one (a few hundred microseconds of CPU work:
// a tokenizer-like hash over the request's text and a small dot product), spread over a pool of worker threads;
// the step ends when the whole batch is scored. The pool's size comes from POOL_THREADS (default 1).
//
// Planted problem: POOL_THREADS unset, one thread scores the whole batch while the machine's other cores idle.
// Fix: POOL_THREADS=2 (or more, up to the cores the machine has): the batch is split across the threads.
//
// Own timers (last line, JSON): the step's median and mean, the pool's size. `--ab ROUNDS` builds both pools (1
// thread and --ab-threads, default 2) in one process and alternates windows of steps between them, the order
// flipping each round; it prints "AB broken_ms=.. fixed_ms=.. saving_pct=.." from the medians over rounds of each
// window's median step: the independent measurement --try is checked against.
//
//   ./pool_server [--steps N] [--batch N] [--work N] [--ab ROUNDS] [--ab-threads N] [--window N]
#include <inferscope/scope.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// One request's scoring: deterministic CPU work proportional to `work`.
double score(int request, int work) {
  uint64_t h = 1469598103934665603ull ^ uint64_t(request);
  double acc = 0;
  for (int i = 0; i < work; ++i) {
    h = (h ^ uint64_t(i)) * 1099511628211ull;  // FNV-1a over the "tokens"
    acc += double(h >> 40) * 1e-9 * (i % 7 == 0 ? -1.0 : 1.0);
  }
  return acc;
}

// A fixed pool: run(n, fn) calls fn(0..n-1) across the threads and returns when all are done.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return int(workers_.size()); }
  void run(int n, const std::function<void(int)>& fn) {
    std::unique_lock lk(mu_);
    fn_ = &fn;
    next_ = 0;
    n_ = n;
    left_ = n;
    ++generation_;
    wake_.notify_all();
    done_.wait(lk, [&] { return left_ == 0; });
    fn_ = nullptr;
  }

 private:
  void loop() {
    uint64_t seen = 0;
    std::unique_lock lk(mu_);
    for (;;) {
      wake_.wait(lk, [&] { return stop_ || (generation_ != seen && next_ < n_); });
      if (stop_) return;
      while (next_ < n_) {
        const int i = next_++;
        const std::function<void(int)>* fn = fn_;
        lk.unlock();
        (*fn)(i);
        lk.lock();
        if (--left_ == 0) done_.notify_one();
      }
      seen = generation_;
    }
  }
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* fn_ = nullptr;
  int next_ = 0, n_ = 0, left_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One step: a batch scored on `pool`; returns its time in ms.
double step(Pool& pool, int first_request, int batch, int work, std::vector<double>& scores) {
  ISCOPE_RANGE("step");
  const double t0 = now_ms();
  pool.run(batch, [&](int i) { scores[size_t(i)] = score(first_request + i, work); });
  return now_ms() - t0;
}

int env_threads() {
  const char* v = std::getenv("POOL_THREADS");
  const int n = v ? std::atoi(v) : 1;
  return n < 1 ? 1 : std::min(n, 256);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 300, batch = 32, work = 40000, ab = 0, ab_threads = 2, window = 20;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "pool_server: %s takes a value\n", argv[i]);
      return 2;
    }
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--steps")) steps = v;
    else if (!std::strcmp(argv[i], "--batch")) batch = v;
    else if (!std::strcmp(argv[i], "--work")) work = v;
    else if (!std::strcmp(argv[i], "--ab")) ab = v;
    else if (!std::strcmp(argv[i], "--ab-threads")) ab_threads = v;
    else if (!std::strcmp(argv[i], "--window")) window = v;
    else {
      std::fprintf(stderr, "pool_server: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 2 || batch < 1 || work < 1 || ab < 0 || ab_threads < 1 || ab_threads > 256 || window < 2) {
    std::fprintf(stderr, "pool_server: --steps and --window take 2 or more, --ab-threads 1 to 256, the others 1 or more\n");
    return 2;
  }
  std::vector<double> scores(static_cast<size_t>(batch));
  if (ab > 0) {
    Pool broken(1), fixed(ab_threads);
    std::vector<double> broken_ms, fixed_ms;
    for (int r = -1; r < ab; ++r) {  // round -1: warm-up
      for (int k = 0; k < 2; ++k) {
        const bool use_fixed = (r % 2 == 0) == (k == 1);
        Pool& pool = use_fixed ? fixed : broken;
        std::vector<double> window_ms;
        for (int s = 0; s < window; ++s) window_ms.push_back(step(pool, s * batch, batch, work, scores));
        if (r >= 0) (use_fixed ? fixed_ms : broken_ms).push_back(median(window_ms));
      }
    }
    const double b = median(broken_ms), f = median(fixed_ms);
    std::printf("AB broken_ms=%.3f fixed_ms=%.3f saving_pct=%.1f rounds=%d window=%d threads=1,%d\n", b, f,
                100.0 * (b - f) / b, ab, window, ab_threads);
    return 0;
  }
  Pool pool(env_threads());
  std::vector<double> ms;
  for (int s = 0; s < steps; ++s) ms.push_back(step(pool, s * batch, batch, work, scores));
  double sum = 0;
  for (double m : ms) sum += m;
  std::printf("{\"program\": \"pool_server\", \"threads\": %d, \"steps\": %d, \"step_ms_p50\": %.3f, "
              "\"step_ms_mean\": %.3f, \"checksum\": %.6f}\n",
              pool.size(), steps, median(ms), sum / double(ms.size()), scores[0]);
  return 0;
}
