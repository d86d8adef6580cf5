// cpp_server: a C++17 CUDA inference server core -- a request queue served by a pool of worker threads, one CUDA
// stream each. It uses no InferScope header or library: iscope-run records it unmodified (CUPTI injection).
//
// What it does: a load generator thread keeps 16 requests in flight (closed loop). A request is a 256 x 1024 fp32
// feature matrix (1 MB, already in pinned memory as a network layer would receive it). A worker takes it off the
// queue and, on its own stream: copies it to the GPU, normalizes every row (layernorm kernel), runs a 1024 -> 1024
// projection with bias + ReLU and a 1024 -> 64 projection with bias (a register-tiled SGEMM kernel), a row softmax,
// copies the 256 x 64 result back and waits for its stream. 8 workers share one set of weights on the device.
//
// Planted problem (memory_alloc): the worker allocates the request's four device buffers with cudaMalloc and
// releases them with cudaFree for every request. cudaMalloc/cudaFree are slow driver calls, and cudaFree
// synchronizes the whole device: every free waits for the work that all other workers have queued, so the 8
// streams stop overlapping and the workers serialize on the allocator.
//
// Fix (--fixed): each worker allocates its device buffers once (sized for the largest request) and reuses them for
// every request; the per-request path has no allocation and no device-wide synchronization.
//
// Build:  nvcc -O2 -std=c++17 -arch=sm_90 server.cu -o server
// Run:    ./server [--fixed] [--seconds S] [--workers N] [--ab ROUNDS] [--window-s S]
//   --ab ROUNDS: both variants in one process; windows of S seconds alternate (order flips every round); prints
//   "AB broken_ms=.. fixed_ms=.. saving_pct=.." with the medians of the per-window mean request latency.
// Last line: one JSON object with the program's own timers (request_ms_p50, request_ms_mean, ...). Exits 77 when
// there is no CUDA device.
// EXPECTED: memory_alloc
// BOTTLENECK: cudaMalloc + cudaFree of the request's device buffers on every request (cudaFree syncs the device)
// FIX: allocate each worker's device buffers once and reuse them (or use a caching allocator / cudaMallocAsync pool)
// FIX_WORDS: cudamalloc, cudafree, preallocate, reuse
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "server: %s failed at line %d: %s\n", #call, __LINE__,                 \
                   cudaGetErrorString(e_));                                                       \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRows = 256;    // rows per request
constexpr int kIn = 1024;     // input features
constexpr int kHidden = 1024;
constexpr int kOut = 64;
constexpr int kInFlight = 16;  // requests the load generator keeps outstanding
constexpr int kPayloads = 32;  // distinct request payloads, reused round-robin

// ---- kernels ------------------------------------------------------------------------------------------------

// One block per row: y = (x - mean) / sqrt(var + eps).
__global__ void layernorm_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float s_sum[256], s_sq[256];
  const float* row = x + static_cast<size_t>(blockIdx.x) * cols;
  float sum = 0.f, sq = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = row[c];
    sum += v;
    sq += v * v;
  }
  s_sum[threadIdx.x] = sum;
  s_sq[threadIdx.x] = sq;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      s_sum[threadIdx.x] += s_sum[threadIdx.x + s];
      s_sq[threadIdx.x] += s_sq[threadIdx.x + s];
    }
    __syncthreads();
  }
  float mean = s_sum[0] / cols;
  float inv = rsqrtf(fmaxf(s_sq[0] / cols - mean * mean, 0.f) + 1e-5f);
  float* out = y + static_cast<size_t>(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * inv;
}

// C[M,N] = act(A[M,K] @ B[K,N] + bias[N]), row-major. 64x64 block tile, 16-deep K tile, 256 threads, 4x4 outputs
// per thread. Requires M % 64 == 0, N % 64 == 0, K % 16 == 0.
template <bool kRelu>
__global__ void __launch_bounds__(256) sgemm_bias(const float* __restrict__ A, const float* __restrict__ B,
                                                  const float* __restrict__ bias, float* __restrict__ C, int M,
                                                  int N, int K) {
  __shared__ float As[16][64 + 4];  // As[k][m]
  __shared__ float Bs[16][64];      // Bs[k][n]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int idx = threadIdx.x + i * 256;  // 0..1023
      const int ar = idx / 16, ac = idx % 16;
      As[ac][ar] = A[static_cast<size_t>(row0 + ar) * K + k0 + ac];
      const int br = idx / 64, bc = idx % 64;
      Bs[br][bc] = B[static_cast<size_t>(k0 + br) * N + col0 + bc];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[k][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = row0 + ty * 4 + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = col0 + tx * 4 + j;
      float v = acc[i][j] + bias[c];
      if (kRelu) v = fmaxf(v, 0.f);
      C[static_cast<size_t>(r) * N + c] = v;
    }
  }
}

// One warp per row of 64: in-place softmax.
__global__ void softmax_rows64(float* __restrict__ x, int rows) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= rows) return;
  float* row = x + static_cast<size_t>(warp) * 64;
  float a = row[lane], b = row[lane + 32];
  float m = fmaxf(a, b);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  a = __expf(a - m);
  b = __expf(b - m);
  float s = a + b;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  row[lane] = a / s;
  row[lane + 32] = b / s;
}

// ---- the server ---------------------------------------------------------------------------------------------

struct Weights {
  float *w1, *b1, *w2, *b2;
};

struct Request {
  const float* input;  // pinned host memory, kRows x kIn
  Clock::time_point submitted;
};

struct DeviceBuffers {
  float *in = nullptr, *x = nullptr, *h = nullptr, *out = nullptr;
};

void alloc_buffers(DeviceBuffers& b) {
  CHECK(cudaMalloc(&b.in, sizeof(float) * kRows * kIn));
  CHECK(cudaMalloc(&b.x, sizeof(float) * kRows * kIn));
  CHECK(cudaMalloc(&b.h, sizeof(float) * kRows * kHidden));
  CHECK(cudaMalloc(&b.out, sizeof(float) * kRows * kOut));
}

void free_buffers(DeviceBuffers& b) {
  CHECK(cudaFree(b.in));
  CHECK(cudaFree(b.x));
  CHECK(cudaFree(b.h));
  CHECK(cudaFree(b.out));
  b = DeviceBuffers{};
}

class Server {
 public:
  Server(int workers, const Weights& w) : weights_(w) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker(); });
  }

  ~Server() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void set_fixed(bool fixed) { fixed_.store(fixed); }

  void submit(const float* input) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back(Request{input, Clock::now()});
      ++outstanding_;
    }
    cv_work_.notify_one();
  }

  // Closed-loop load for `seconds`: keeps kInFlight requests outstanding. Returns the request latencies (ms).
  std::vector<double> run_load(double seconds, const std::vector<float*>& payloads, double* service_ms_mean) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      latencies_.clear();
      service_.clear();
    }
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    size_t next = 0;
    while (Clock::now() < end) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_done_.wait(lk, [this] { return outstanding_ < kInFlight; });
      }
      submit(payloads[next++ % payloads.size()]);
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_done_.wait(lk, [this] { return outstanding_ == 0; });
    double s = 0;
    for (double v : service_) s += v;
    *service_ms_mean = service_.empty() ? 0 : s / service_.size();
    return latencies_;
  }

  double checksum() const { return checksum_.load(); }

 private:
  void worker() {
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    float* result = nullptr;  // pinned staging for the result
    CHECK(cudaMallocHost(&result, sizeof(float) * kRows * kOut));
    std::vector<float> response(kRows * kOut);
    DeviceBuffers persistent;  // the fixed variant's buffers, allocated on first use
    for (;;) {
      Request req;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_work_.wait(lk, [this] { return stop_ || !queue_.empty(); });
        if (stop_ && queue_.empty()) break;
        req = queue_.front();
        queue_.pop_front();
      }
      const auto t_start = Clock::now();
      DeviceBuffers buf;
      const bool fixed = fixed_.load();
      if (fixed) {
        if (!persistent.in) alloc_buffers(persistent);
        buf = persistent;
      } else {
        alloc_buffers(buf);  // per-request temporaries
      }
      CHECK(cudaMemcpyAsync(buf.in, req.input, sizeof(float) * kRows * kIn, cudaMemcpyHostToDevice, stream));
      layernorm_rows<<<kRows, 256, 0, stream>>>(buf.in, buf.x, kIn);
      sgemm_bias<true><<<dim3(kHidden / 64, kRows / 64), 256, 0, stream>>>(buf.x, weights_.w1, weights_.b1, buf.h,
                                                                           kRows, kHidden, kIn);
      sgemm_bias<false><<<dim3(kOut / 64, kRows / 64), 256, 0, stream>>>(buf.h, weights_.w2, weights_.b2, buf.out,
                                                                         kRows, kOut, kHidden);
      softmax_rows64<<<kRows / 8, 256, 0, stream>>>(buf.out, kRows);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpyAsync(result, buf.out, sizeof(float) * kRows * kOut, cudaMemcpyDeviceToHost, stream));
      CHECK(cudaStreamSynchronize(stream));
      if (!fixed) free_buffers(buf);
      std::memcpy(response.data(), result, sizeof(float) * response.size());  // "send" the response
      const auto t_end = Clock::now();
      {
        std::lock_guard<std::mutex> lk(mu_);
        latencies_.push_back(std::chrono::duration<double, std::milli>(t_end - req.submitted).count());
        service_.push_back(std::chrono::duration<double, std::milli>(t_end - t_start).count());
        --outstanding_;
      }
      double cs = checksum_.load();
      checksum_.store(cs + response[0]);
      cv_done_.notify_one();
    }
    if (persistent.in) free_buffers(persistent);
    CHECK(cudaFreeHost(result));
    CHECK(cudaStreamDestroy(stream));
  }

  Weights weights_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::deque<Request> queue_;
  std::vector<double> latencies_, service_;
  int outstanding_ = 0;
  bool stop_ = false;
  std::atomic<bool> fixed_{false};
  std::atomic<double> checksum_{0.0};
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double k = (v.size() - 1) * q / 100.0;
  size_t lo = static_cast<size_t>(k), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (k - lo);
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

float lcg(uint32_t& s) {  // deterministic pseudo-random in [-1, 1)
  s = s * 1664525u + 1013904223u;
  return (s >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

float* upload(const std::vector<float>& h) {
  float* d = nullptr;
  CHECK(cudaMalloc(&d, sizeof(float) * h.size()));
  CHECK(cudaMemcpy(d, h.data(), sizeof(float) * h.size(), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  bool fixed = false;
  double seconds = 12.0, window_s = 1.0;
  int workers = 8, ab = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](const char* what) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "server: %s needs a value\n", what);
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--fixed") fixed = true;
    else if (a == "--seconds") seconds = std::stod(next("--seconds"));
    else if (a == "--workers") workers = std::stoi(next("--workers"));
    else if (a == "--ab") ab = std::stoi(next("--ab"));
    else if (a == "--window-s") window_s = std::stod(next("--window-s"));
    else {
      std::fprintf(stderr, "usage: server [--fixed] [--seconds S] [--workers N] [--ab ROUNDS] [--window-s S]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("server: no CUDA device; nothing to run\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));

  // Weights, deterministic, uploaded once.
  uint32_t seed = 12345;
  std::vector<float> w1(static_cast<size_t>(kIn) * kHidden), b1(kHidden), w2(static_cast<size_t>(kHidden) * kOut),
      b2(kOut);
  for (auto& v : w1) v = lcg(seed) * 0.03f;
  for (auto& v : b1) v = lcg(seed) * 0.1f;
  for (auto& v : w2) v = lcg(seed) * 0.03f;
  for (auto& v : b2) v = lcg(seed) * 0.1f;
  Weights weights{upload(w1), upload(b1), upload(w2), upload(b2)};

  // Request payloads in pinned memory (as a network layer would receive them).
  std::vector<float*> payloads(kPayloads);
  for (auto& p : payloads) {
    CHECK(cudaMallocHost(&p, sizeof(float) * kRows * kIn));
    for (int i = 0; i < kRows * kIn; ++i) p[i] = lcg(seed) * 3.0f + 0.5f;
  }
  std::printf("server: %s, %d workers (one stream each), %d requests in flight, request %dx%d fp32 (%.1f MB)\n",
              prop.name, workers, kInFlight, kRows, kIn, kRows * kIn * 4 / 1e6);
  std::fflush(stdout);

  int rc = 0;
  {
    Server server(workers, weights);
    double service_mean = 0;
    if (ab > 0) {
      std::vector<double> win[2];
      for (int r = -1; r < ab; ++r) {  // round -1 warms both variants up
        for (int k = 0; k < 2; ++k) {
          const int v = (r % 2 == 0) ? k : 1 - k;  // 0 = broken, 1 = fixed
          server.set_fixed(v == 1);
          auto lat = server.run_load(r < 0 ? 0.3 : window_s, payloads, &service_mean);
          if (r >= 0) win[v].push_back(mean(lat));
        }
      }
      const double b = percentile(win[0], 50), f = percentile(win[1], 50);
      std::printf("AB broken_ms=%.3f fixed_ms=%.3f saving_pct=%.1f rounds=%d window=%.1fs\n", b, f,
                  (b - f) / b * 100.0, ab, window_s);
      std::printf("{\"program\": \"cpp_server\", \"variant\": \"ab\", \"step_ms_p50\": %.3f, \"step_ms_mean\": %.3f, "
                  "\"broken_request_ms\": %.3f, \"fixed_request_ms\": %.3f, \"rounds\": %d, \"window_s\": %.1f}\n",
                  b, mean(win[0]), b, f, ab, window_s);
    } else {
      server.set_fixed(fixed);
      server.run_load(0.5, payloads, &service_mean);  // warm-up
      const auto t0 = Clock::now();
      auto lat = server.run_load(seconds, payloads, &service_mean);
      const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      const double p50 = percentile(lat, 50), avg = mean(lat);
      std::printf("{\"program\": \"cpp_server\", \"variant\": \"%s\", \"step_ms_p50\": %.3f, \"step_ms_mean\": %.3f, "
                  "\"request_ms_p50\": %.3f, \"request_ms_mean\": %.3f, \"request_ms_p99\": %.3f, "
                  "\"service_ms_mean\": %.3f, \"requests\": %zu, \"throughput_rps\": %.1f, \"workers\": %d}\n",
                  fixed ? "fixed" : "broken", p50, avg, p50, avg, percentile(lat, 99), service_mean, lat.size(),
                  lat.size() / elapsed, workers);
      if (lat.empty()) rc = 1;
    }
    std::fflush(stdout);
    if (std::isnan(server.checksum())) rc = 1;  // NaN in the results
  }
  for (auto* p : payloads) CHECK(cudaFreeHost(p));
  CHECK(cudaFree(weights.w1));
  CHECK(cudaFree(weights.b1));
  CHECK(cudaFree(weights.w2));
  CHECK(cudaFree(weights.b2));
  return rc;
}
