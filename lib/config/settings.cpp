// Minimal environment-only resolver; the full model (YAML file, flags, origins, validation of every key)
// is built by the configuration issue on top of this same interface.
#include "config/settings.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace inferscope::config {
namespace {

bool parse_bool(const char* var, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) return false;
  throw ConfigError(std::string(var) + "='" + v + "': expected a boolean (1/0, true/false, yes/no, on/off)");
}

uint64_t parse_uint(const char* var, const std::string& v, uint64_t lo, uint64_t hi) {
  char* end = nullptr;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    throw ConfigError(std::string(var) + "='" + v + "': expected an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  return x;
}

}  // namespace

Resolved resolve(const ResolveOptions& options) {
  Resolved r;
  if (!options.read_environment) return r;
  auto env = [&](const char* var, const char* key) -> const char* {
    const char* v = std::getenv(var);
    if (v) r.origin[key] = std::string("env:") + var;
    return v;
  };
  if (const char* v = env("INFERSCOPE_ENABLE", "enable")) r.config.enable = parse_bool("INFERSCOPE_ENABLE", v);
  if (const char* v = env("INFERSCOPE_OUTPUT", "output")) r.config.output = v;
  if (const char* v = env("INFERSCOPE_BUFFER_MODE", "buffer_mode")) {
    std::string s = v;
    if (s == "stream") r.config.buffer_mode = BufferMode::kStream;
    else if (s == "ring") r.config.buffer_mode = BufferMode::kRing;
    else throw ConfigError("INFERSCOPE_BUFFER_MODE='" + s + "': expected stream or ring");
  }
  if (const char* v = env("INFERSCOPE_TRACE_SIZE_MB", "trace_size_mb"))
    r.config.trace_size_mb = parse_uint("INFERSCOPE_TRACE_SIZE_MB", v, 1, 65536);
  if (const char* v = env("INFERSCOPE_THREAD_BUFFER_KB", "thread_buffer_kb"))
    r.config.thread_buffer_kb = static_cast<uint32_t>(parse_uint("INFERSCOPE_THREAD_BUFFER_KB", v, 64, 262144));
  if (const char* v = env("INFERSCOPE_REPORT", "report")) r.config.report = v;
  return r;
}

}  // namespace inferscope::config

namespace inferscope {
std::string default_output_path() { return "inferscope-" + std::to_string(::getpid()) + ".iscope"; }
}  // namespace inferscope
