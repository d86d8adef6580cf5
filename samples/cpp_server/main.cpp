// A multi-threaded request-serving loop annotated with InferScope: worker threads tokenize requests, one
// batcher thread groups them, runs the "model" on the CPU and post-processes. Run it under the profiler:
//
//   INFERSCOPE_ENABLE=1 INFERSCOPE_OUTPUT=server.iscope ./sample_cpp_server --requests 256
//   iscope-analyze server.iscope --summary
//
// It prints what it did on its last line, so a test can check the dump against it.
#include <inferscope/scope.hpp>

#include <cmath>
#include <cstdint>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Request {
  int id;
  std::vector<int> tokens;
  inferscope::AsyncRange latency;  // from arrival on a worker to the end of post-processing on the batcher
};

class BatchQueue {
 public:
  void push(Request r) {
    std::lock_guard lk(mu_);
    q_.push_back(std::move(r));
    cv_.notify_one();
  }
  void close() {
    std::lock_guard lk(mu_);
    closed_ = true;
    cv_.notify_one();
  }
  // Up to `n` requests; waits until n are queued or the queue is closed.
  std::vector<Request> take(size_t n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return q_.size() >= n || closed_; });
    std::vector<Request> out;
    while (!q_.empty() && out.size() < n) {
      out.push_back(std::move(q_.front()));
      q_.pop_front();
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> q_;
  bool closed_ = false;
};

std::vector<int> tokenize(const std::string& text) {
  ISCOPE_FUNC();
  std::vector<int> tokens;
  uint32_t h = 0;
  for (char c : text) {
    h = h * 31 + static_cast<unsigned char>(c);
    if (c == ' ') tokens.push_back(static_cast<int>(h & 0xffff)), h = 0;
  }
  tokens.push_back(static_cast<int>(h & 0xffff));
  return tokens;
}

double run_model(const std::vector<Request>& batch, int work) {
  ISCOPE_RANGE_ATTRS("compute", {"batch_size", static_cast<int64_t>(batch.size())});
  double acc = 0;
  for (const auto& r : batch)
    for (int t : r.tokens)
      for (int i = 0; i < work; ++i) acc += std::sin(t * 0.001 + i);
  return acc;
}

void postprocess(Request& r, double logits) {
  ISCOPE_RANGE("postprocess");
  volatile double v = logits * r.id;
  (void)v;
  r.latency.end();
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 256, workers = 4, batch = 8, work = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--workers")) workers = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch")) batch = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--work")) work = std::atoi(argv[i + 1]);
  }
  if (requests < 1 || workers < 1 || batch < 1 || work < 0) {
    std::fprintf(stderr, "usage: sample_cpp_server [--requests N] [--workers N] [--batch N] [--work N]\n");
    return 2;
  }
  inferscope::set_thread_name("main");
  BatchQueue queue;
  int batches = 0, full_batches = 0;
  std::thread batcher([&] {
    inferscope::set_thread_name("batcher");
    for (;;) {
      std::vector<Request> b = queue.take(static_cast<size_t>(batch));
      if (b.empty()) break;
      ++batches;
      if (static_cast<int>(b.size()) == batch) {
        ++full_batches;
        inferscope::mark_event("batch_full", {{"size", static_cast<int64_t>(b.size())}});
      }
      ISCOPE_RANGE("batch");
      double logits = run_model(b, work);
      for (auto& r : b) postprocess(r, logits);
    }
  });
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      inferscope::set_thread_name("worker-" + std::to_string(w));
      for (int id = w; id < requests; id += workers) {
        ISCOPE_RANGE("request");
        Request r{id, {}, inferscope::AsyncRange("request_latency")};
        r.tokens = tokenize("request " + std::to_string(id) + " asks the model something rather long");
        queue.push(std::move(r));
      }
    });
  }
  for (auto& t : pool) t.join();
  queue.close();
  batcher.join();
  std::printf("sample: requests=%d tokenize=%d batches=%d batch_full=%d postprocess=%d threads=%d\n", requests,
              requests, batches, full_batches, requests, workers + 2);
  return 0;
}
