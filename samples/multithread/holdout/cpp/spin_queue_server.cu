// spin_queue_server.cu: a C++/CUDA feature server whose request thread waits on two preprocessing producers.
//
// Two producer std::threads ('producer-0', 'producer-1') turn raw 2048x1024 8-bit sensor frames into 512x1024
// float feature matrices (synthesise/receive the frame, a separable 7-tap blur applied twice, 2x2 binning,
// per-row normalisation: ~2M pixels touched a dozen times, some 20 ms per frame on one core) and push them into
// a bounded queue guarded by a std::mutex and two std::condition_variables. The request thread ('request')
// pops one matrix per request, waiting "just in case" with std::condition_variable::wait_for and a 1 ms
// timeout in a loop, copies it to the GPU and runs a 4-layer MLP with its own tiled SGEMM kernels. Two
// producers deliver a frame more slowly than the GPU consumes one, so the request spends most of its time in
// the wait_for loop: it waits on the producer threads (the 1 ms timeouts only add wake-ups, not the delay).
// Fix (--fixed): 8 producer threads feeding the same queue.
//
//   WAITS_ON = "producer threads 'producer-N' (range 'produce', preprocess_frame) filling the queue the request polls"
//   WAITS_ON_NAMES = ["producer"]
//   HOT_FUNCTIONS = ["preprocess_frame", "blur_rows", "blur_cols", "synthesize_frame"]
//   FIX = "Run 8 producer threads instead of 2 so that preprocessing keeps up with the GPU."
//   FIX_WORDS = ["producer", "thread", "more"]
//
// Build:
//   nvcc -O2 -std=c++17 -arch=sm_90 -I<repo>/include spin_queue_server.cu -L<build>/lib/runtime -linferscope
//        -o spin_queue_server
// Run:
//   LD_LIBRARY_PATH=<build>/lib/runtime INFERSCOPE_ENABLE=1 ./spin_queue_server     # broken, recorded
//   ./spin_queue_server --fixed ; ./spin_queue_server --ab 5 [--window 20] ; --steps N
// Exits 77 without a CUDA device. Starts no recording session itself (INFERSCOPE_ENABLE=1 does).

#include <cuda_runtime.h>
#include <inferscope/scope.hpp>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRawH = 1024, kRawW = 2048;   // raw frame (uint8)
constexpr int kRows = 512, kCols = 1024;    // features after 2x2 binning: kRows x kCols floats (2 MB)
constexpr int kHidden = 2048, kOut = 256;
constexpr int kQueueCap = 4;

#define CUDA_CHECK(expr)                                                                         \
  do {                                                                                           \
    cudaError_t err_ = (expr);                                                                   \
    if (err_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "spin_queue_server: %s failed: %s\n", #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

void name_thread(const char* name) {
  pthread_setname_np(pthread_self(), name);  // at most 15 characters
  inferscope::set_thread_name(name);
}

// ---------------------------------------------------------------------------------------------------------
// Preprocessing (the producers' work)

struct Frame {
  uint64_t id = 0;
  std::vector<float> x;  // kRows x kCols
};

// Stands in for receiving a frame from a sensor: a moving gradient plus xorshift noise.
__attribute__((noinline)) void synthesize_frame(uint64_t id, std::vector<uint8_t>& raw) {
  uint32_t s = static_cast<uint32_t>(id * 2654435761u) | 1u;
  for (int y = 0; y < kRawH; ++y) {
    uint8_t* row = raw.data() + static_cast<size_t>(y) * kRawW;
    for (int x = 0; x < kRawW; ++x) {
      s ^= s << 13;
      s ^= s >> 17;
      s ^= s << 5;
      row[x] = static_cast<uint8_t>(((x + y + static_cast<int>(id)) & 127) + (s & 63));
    }
  }
}

constexpr float kTaps[7] = {0.03f, 0.11f, 0.22f, 0.28f, 0.22f, 0.11f, 0.03f};

__attribute__((noinline)) void blur_rows(const std::vector<float>& in, std::vector<float>& out, int h, int w) {
  for (int y = 0; y < h; ++y) {
    const float* src = in.data() + static_cast<size_t>(y) * w;
    float* dst = out.data() + static_cast<size_t>(y) * w;
    for (int x = 0; x < w; ++x) {
      if (x == 3) x = w - 3;  // the interior is done below, without clamping
      float acc = 0.f;
      for (int k = -3; k <= 3; ++k) acc += kTaps[k + 3] * src[std::min(std::max(x + k, 0), w - 1)];
      dst[x] = acc;
    }
    for (int x = 3; x < w - 3; ++x) {
      float acc = 0.f;
      for (int k = 0; k < 7; ++k) acc += kTaps[k] * src[x + k - 3];
      dst[x] = acc;
    }
  }
}

__attribute__((noinline)) void blur_cols(const std::vector<float>& in, std::vector<float>& out, int h, int w) {
  for (int y = 0; y < h; ++y) {
    float* dst = out.data() + static_cast<size_t>(y) * w;
    for (int x = 0; x < w; ++x) dst[x] = 0.f;
    for (int k = -3; k <= 3; ++k) {
      const int yy = std::min(std::max(y + k, 0), h - 1);
      const float* src = in.data() + static_cast<size_t>(yy) * w;
      const float t = kTaps[k + 3];
      for (int x = 0; x < w; ++x) dst[x] += t * src[x];
    }
  }
}

// raw frame -> blurred (twice), binned 2x2, per-row normalised feature matrix.
__attribute__((noinline)) void preprocess_frame(uint64_t id, std::vector<uint8_t>& raw, std::vector<float>& a,
                                                std::vector<float>& b, std::vector<float>& out) {
  synthesize_frame(id, raw);
  for (size_t i = 0; i < raw.size(); ++i) a[i] = raw[i] * (1.0f / 255.0f);
  for (int pass = 0; pass < 2; ++pass) {
    blur_rows(a, b, kRawH, kRawW);
    blur_cols(b, a, kRawH, kRawW);
  }
  for (int y = 0; y < kRows; ++y) {
    const float* r0 = a.data() + static_cast<size_t>(2 * y) * kRawW;
    const float* r1 = r0 + kRawW;
    float* dst = out.data() + static_cast<size_t>(y) * kCols;
    double sum = 0, sq = 0;
    for (int x = 0; x < kCols; ++x) {
      const float v = 0.25f * (r0[2 * x] + r0[2 * x + 1] + r1[2 * x] + r1[2 * x + 1]);
      dst[x] = v;
      sum += v;
      sq += static_cast<double>(v) * v;
    }
    const double mean = sum / kCols;
    const float inv = static_cast<float>(1.0 / std::sqrt(std::max(sq / kCols - mean * mean, 1e-8)));
    for (int x = 0; x < kCols; ++x) dst[x] = (dst[x] - static_cast<float>(mean)) * inv;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The bounded queue and its producers

class FrameQueue {
 public:
  explicit FrameQueue(size_t cap) : cap_(cap) {}

  bool push(Frame&& f) {
    std::unique_lock<std::mutex> lk(m_);
    not_full_.wait(lk, [&] { return stop_ || q_.size() < cap_; });
    if (stop_) return false;
    q_.push_back(std::move(f));
    lk.unlock();
    not_empty_.notify_one();
    return true;
  }

  // Waits for a frame, waking up every millisecond in case a notification is missed.
  bool pop(Frame& out) {
    std::unique_lock<std::mutex> lk(m_);
    while (q_.empty()) {
      if (stop_) return false;
      not_empty_.wait_for(lk, std::chrono::milliseconds(1));
    }
    out = std::move(q_.front());
    q_.pop_front();
    lk.unlock();
    not_full_.notify_one();
    return true;
  }

  void close() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Frame> q_;
  size_t cap_;
  bool stop_ = false;
};

class ProducerPool {
 public:
  ProducerPool(int n, int first_index) : queue_(kQueueCap) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i, first_index] { run(first_index + i); });
  }
  ~ProducerPool() {
    queue_.close();
    for (auto& t : threads_) t.join();
  }
  FrameQueue& queue() { return queue_; }

 private:
  void run(int index) {
    const std::string name = "producer-" + std::to_string(index);
    name_thread(name.c_str());
    std::vector<uint8_t> raw(static_cast<size_t>(kRawH) * kRawW);
    std::vector<float> a(raw.size()), b(raw.size());
    for (;;) {
      Frame f;
      f.id = next_id_.fetch_add(1);
      f.x.resize(static_cast<size_t>(kRows) * kCols);
      {
        ISCOPE_RANGE("produce");
        preprocess_frame(f.id, raw, a, b, f.x);
      }
      if (!queue_.push(std::move(f))) return;
    }
  }

  FrameQueue queue_;
  std::atomic<uint64_t> next_id_{0};
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------------------------------------
// The model: out = relu(relu(relu(X W1) W2) W3) W4 with a tiled SGEMM (row-major, sizes multiples of 32)

constexpr int kTile = 32;

__global__ void sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                            int M, int N, int K, int relu) {
  __shared__ float As[kTile][kTile + 1];
  __shared__ float Bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;  // blockDim = (32, 8): each thread computes 4 rows
  const int col = blockIdx.x * kTile + tx;
  const int row0 = blockIdx.y * kTile + ty;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += kTile) {
    for (int r = 0; r < 4; ++r) {
      As[ty + 8 * r][tx] = A[static_cast<size_t>(row0 + 8 * r) * K + k0 + tx];
      Bs[ty + 8 * r][tx] = B[static_cast<size_t>(k0 + ty + 8 * r) * N + col];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) {
      const float bv = Bs[k][tx];
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[r] += As[ty + 8 * r][k] * bv;
    }
    __syncthreads();
  }
  for (int r = 0; r < 4; ++r) {
    const float v = acc[r];
    C[static_cast<size_t>(row0 + 8 * r) * N + col] = relu ? fmaxf(v, 0.f) : v;
  }
}

__global__ void init_weights(float* w, size_t n, float scale, uint32_t seed) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  w[i] = ((h & 0xffffff) / 16777216.0f - 0.5f) * 2.f * scale;
}

class Model {
 public:
  Model() {
    CUDA_CHECK(cudaStreamCreate(&stream_));
    const int dims[5] = {kCols, kHidden, kHidden, kHidden, kOut};
    for (int l = 0; l < 4; ++l) {
      in_[l] = dims[l];
      out_[l] = dims[l + 1];
      const size_t n = static_cast<size_t>(in_[l]) * out_[l];
      CUDA_CHECK(cudaMalloc(&w_[l], n * sizeof(float)));
      init_weights<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream_>>>(w_[l], n,
                                                                            1.7f / std::sqrt(in_[l]), 17u + l);
    }
    CUDA_CHECK(cudaMalloc(&x_, static_cast<size_t>(kRows) * kCols * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&h0_, static_cast<size_t>(kRows) * kHidden * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&h1_, static_cast<size_t>(kRows) * kHidden * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&out_host_, static_cast<size_t>(kRows) * kOut * sizeof(float)));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  ~Model() {
    for (auto* w : w_) cudaFree(w);
    cudaFree(x_);
    cudaFree(h0_);
    cudaFree(h1_);
    cudaFreeHost(out_host_);
    cudaStreamDestroy(stream_);
  }

  // One request: features to the GPU, 4 layers, scores back; returns a checksum of the scores.
  float infer(const Frame& f) {
    ISCOPE_RANGE("infer");
    CUDA_CHECK(cudaMemcpyAsync(x_, f.x.data(), f.x.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    const float* in = x_;
    float* bufs[2] = {h0_, h1_};
    for (int l = 0; l < 4; ++l) {
      float* out = bufs[l % 2];
      dim3 block(kTile, 8), grid(out_[l] / kTile, kRows / kTile);
      sgemm_tiled<<<grid, block, 0, stream_>>>(in, w_[l], out, kRows, out_[l], in_[l], l < 3 ? 1 : 0);
      in = out;
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(out_host_, in, static_cast<size_t>(kRows) * kOut * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    float s = 0.f;
    for (int i = 0; i < kRows * kOut; i += 97) s += out_host_[i];
    return s;
  }

 private:
  cudaStream_t stream_ = nullptr;
  float* w_[4] = {nullptr, nullptr, nullptr, nullptr};
  int in_[4] = {0, 0, 0, 0}, out_[4] = {0, 0, 0, 0};
  float* x_ = nullptr;
  float* h0_ = nullptr;
  float* h1_ = nullptr;
  float* out_host_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// The request loop

bool handle_request(Model& model, FrameQueue& q, double* checksum) {
  ISCOPE_RANGE("request");
  Frame f;
  if (!q.pop(f)) return false;
  *checksum += model.infer(f);
  return true;
}

struct Args {
  bool fixed = false;
  int steps = 40;
  int ab = 0;
  int window = 20;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run_requests(const Args& args) {
  name_thread("request");
  double checksum = 0;
  if (args.ab > 0) {
    // Both set-ups exist before the first window; an idle pool stops on its full queue.
    ProducerPool broken(2, 0), fixed(8, 2);
    Model model;
    FrameQueue* queues[2] = {&broken.queue(), &fixed.queue()};
    for (auto* q : queues)
      for (int i = 0; i < 2; ++i)
        if (!handle_request(model, *q, &checksum)) return 1;
    std::vector<double> times[2];
    for (int r = 0; r < args.ab; ++r) {
      const int order[2] = {r % 2, 1 - r % 2};
      for (int v : order) {
        const double t = now_s();
        for (int i = 0; i < args.window; ++i)
          if (!handle_request(model, *queues[v], &checksum)) return 1;
        times[v].push_back((now_s() - t) / args.window * 1e3);
      }
    }
    const double b = median(times[0]), x = median(times[1]);
    std::printf("AB broken_ms=%.3f fixed_ms=%.3f saving_pct=%.1f rounds=%d window=%d\n", b, x, (b - x) / b * 100,
                args.ab, args.window);
  } else {
    ProducerPool pool(args.fixed ? 8 : 2, 0);
    Model model;
    const double t0 = now_s();
    double t_first = t0;
    for (int i = 0; i < args.steps; ++i) {
      if (!handle_request(model, pool.queue(), &checksum)) return 1;
      if (i == 0) t_first = now_s();
    }
    const double t_end = now_s();
    const double rest = (t_end - t_first) / std::max(args.steps - 1, 1) * 1e3;
    std::printf("spin_queue_server (%s): %d steps in %.2f s; first step %.1f ms (warm-up), then %.2f ms/step\n",
                args.fixed ? "fixed" : "broken", args.steps, t_end - t0, (t_first - t0) * 1e3, rest);
  }
  std::fflush(stdout);
  if (!std::isfinite(checksum)) std::fprintf(stderr, "spin_queue_server: non-finite scores\n");
  return 0;
}

int usage(const char* prog) {
  std::fprintf(stderr, "usage: %s [--fixed] [--steps N] [--ab ROUNDS] [--window W]\n", prog);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](int& out) {
      if (i + 1 >= argc) return false;
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || v < 0) return false;
      out = static_cast<int>(v);
      return true;
    };
    if (a == "--fixed") {
      args.fixed = true;
    } else if (a == "--steps") {
      if (!value(args.steps) || args.steps < 1) return usage(argv[0]);
    } else if (a == "--ab") {
      if (!value(args.ab)) return usage(argv[0]);
    } else if (a == "--window") {
      if (!value(args.window) || args.window < 1) return usage(argv[0]);
    } else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      return 0;
    } else {
      return usage(argv[0]);
    }
  }

  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("spin_queue_server: no CUDA device (%s); nothing to run\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }

  int rc = 0;
  std::thread request([&] { rc = run_requests(args); });
  request.join();
  return rc;
}
