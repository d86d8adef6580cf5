// perfetto_proto_size DUMP...: the size of the Perfetto trace-event JSON that iscope-analyze --perfetto writes
// for each dump, against the same events in Perfetto's protobuf format (proto_trace.hpp), each also deflated
// (zlib level 6), as a table in Markdown (docs/history/benchmarks-2026-11.md, section "Perfetto trace size").
#include "dump/reader.hpp"
#include "proto_trace.hpp"
#include "export/perfetto.hpp"

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

namespace {

size_t deflated(const std::string& s) {
  uLongf n = compressBound(s.size());
  std::string out(n, '\0');
  const auto* in = reinterpret_cast<const Bytef*>(s.data());
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &n, in, s.size(), 6) != Z_OK) return 0;
  return n;
}

std::string mb(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", static_cast<double>(bytes) / 1e6);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: perfetto_proto_size DUMP...\n");
    return 2;
  }
  std::printf("| dump | events | JSON MB | proto MB | proto, strings interned MB | JSON / proto | JSON deflated MB | "
              "proto deflated MB |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int i = 1; i < argc; ++i) {
    inferscope::dump::DumpReader r(argv[i]);
    std::ostringstream out;
    inferscope::exporter::write_perfetto(r, out);
    const std::string json = out.str();
    inferscope::bench::ProtoStats st;
    const std::string proto = inferscope::bench::encode_proto_trace(json, {}, &st);
    const std::string interned = inferscope::bench::encode_proto_trace(json, {.intern_strings = true});
    std::printf("| %s | %zu | %s | %s | %s | %.1f | %s | %s |\n",
                std::filesystem::path(argv[i]).filename().c_str(), st.slices + st.instants + st.counters,
                mb(json.size()).c_str(), mb(proto.size()).c_str(), mb(interned.size()).c_str(),
                static_cast<double>(json.size()) / static_cast<double>(interned.size()), mb(deflated(json)).c_str(),
                mb(deflated(interned)).c_str());
    if (st.improperly_nested)
      std::fprintf(stderr, "%s: %zu slices end after the slice they start in\n", argv[i], st.improperly_nested);
  }
  return 0;
}
