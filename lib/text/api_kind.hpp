// What a CUDA API call does to the calling thread, told by the function's name: the one classification the
// analyzer (pass 1, lib/analyze/ingest.cpp) and the live tap (lib/live/tap.cpp, its per-step split) both use.
// Header-only, in lib/text with the other readings of names: the runtime's live library and the analyzer both
// depend on it, and neither on the other.
#pragma once

#include <cstdint>
#include <string_view>

namespace inferscope::text {

enum ApiKind : uint8_t { kLaunch = 0, kSync = 1, kCopySync = 2, kCopyAsync = 3, kAlloc = 4, kFree = 5, kOtherApi = 6 };

/// cudaDeviceSynchronize, cuStreamSynchronize, cudaEventSynchronize... -> kSync; cudaLaunchKernel, cuLaunchKernel,
/// cudaGraphLaunch -> kLaunch; cudaMemcpy (blocking) -> kCopySync; cudaMemcpyAsync, cudaMemset* -> kCopyAsync;
/// allocations, frees, anything else.
inline ApiKind classify_api(std::string_view n) {
  auto has = [&](const char* s) { return n.find(s) != std::string_view::npos; };
  if (has("Synchronize")) return kSync;
  if (has("Launch")) return kLaunch;
  if (has("Memcpy") || has("Memset")) return has("Async") ? kCopyAsync : (has("Memcpy") ? kCopySync : kCopyAsync);
  if (has("Free")) return kFree;
  if (has("Malloc") || has("MemAlloc") || has("MemCreate")) return kAlloc;
  return kOtherApi;
}

}  // namespace inferscope::text
