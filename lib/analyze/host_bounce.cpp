// Stage "host bounces" (host_bounce.hpp).
#include "analyze/host_bounce.hpp"

#include <map>
#include <vector>

namespace inferscope::analyze::detail {

HostBounces find_host_bounces(std::span<const GpuOp> gpu) {
  HostBounces out;
  struct Open {
    int64_t end;
    uint32_t dur;
    uint8_t device;
  };
  std::map<uint32_t, std::vector<Open>> open;  // device-to-host copies not yet paired, by size
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> by_devices;
  for (const GpuOp& op : gpu) {
    if (op.kind == kD2H) {
      out.d2h_bytes += op.name_or_bytes;
      auto& v = open[op.name_or_bytes];
      v.push_back({op.end(), op.dur, op.device});
      // Only the latest few can still pair: older ones fall out of the window as time goes on.
      if (v.size() > 64) v.erase(v.begin(), v.begin() + 32);
      continue;
    }
    if (op.kind != kH2D) continue;
    out.h2d_bytes += op.name_or_bytes;
    auto it = open.find(op.name_or_bytes);
    if (it == open.end() || op.name_or_bytes == 0) continue;
    auto& v = it->second;
    for (size_t i = v.size(); i-- > 0;) {
      const Open& d = v[i];
      if (d.device == op.device || d.end > op.start) continue;
      if (op.start - d.end > kBounceWindowNs) break;  // earlier ones ended even longer before
      ++out.pairs;
      out.bytes += op.name_or_bytes;
      out.d2h_ns += d.dur;
      out.h2d_ns += op.dur;
      ++by_devices[{d.device, op.device}];
      v.erase(v.begin() + std::ptrdiff_t(i));
      break;
    }
  }
  uint64_t best = 0;
  for (const auto& [devices, n] : by_devices)
    if (n > best) best = n, out.from_device = devices.first, out.to_device = devices.second;
  return out;
}

}  // namespace inferscope::analyze::detail
