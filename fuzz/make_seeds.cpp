// Writes the seed corpus for fuzz_dump_reader: small valid dumps covering every record kind, attributes,
// several chunks per thread, a truncated dump and one without an END chunk.  make_seeds OUTDIR
#include "dump/builder.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

using namespace inferscope;

namespace {

void full_trace(dump::DumpBuilder& b) {
  const uint32_t main = b.thread("main", 100);
  const uint32_t worker = b.thread("worker", 101);
  const uint32_t gpu = b.channel("cupti");
  const uint32_t sys = b.channel("system");
  b.process("hostname", "fuzz");
  b.status("cupti", "ok");
  b.api(main, "cudaLaunchKernel", 1, 10, 20);
  b.api(main, "cudaMemcpyAsync", 2, 30, 40, 41, ApiDomain::kDriver);
  b.range(main, "inner", 1, 5, 50, {{"i", 3}, {"d", 2.5}, {"s", "text"}});
  b.range(main, "nvtx", 1, 55, 60, {}, RecordKind::kNvtxRange);
  b.mark(main, "mark", 61);
  b.range(main, "step", 0, 0, 100);
  b.pycall(worker, b.code("f", "a.py", 3), 0, 0, 90);
  b.kernel(gpu, "k", 1, 25, 45);
  b.memcpy(gpu, CopyKind::kHtoD, 4096, 2, 45, 60);
  b.memset(gpu, 64, 0, 60, 61);
  b.sync(gpu, SyncKind::kStreamSynchronize, 3, 61, 70, 7);
  b.memory(gpu, true, 1 << 20, 4, 5, 0x1000);
  b.memory(gpu, false, 1 << 20, 5, 95, 0x1000);
  b.clock_check(gpu, 1, 2, 3);
  b.counter(sys, "cpu.user_ns", CounterScope::kProcess, 0, 50, 7);
  b.counter_double(sys, "gpu.util_pct", CounterScope::kDevice, 0, 50, 50.5);
  b.async_range(worker, "async", 9, 1, 99, main, worker);
  ThreadNameRecord tn{{RecordKind::kThreadName, 0, sizeof(ThreadNameRecord)}, b.str("renamed"), b.ticks(2)};
  b.raw(worker, &tn, sizeof(tn));
  ThreadEndRecord te{{RecordKind::kThreadEnd, 0, sizeof(ThreadEndRecord)}, 0, b.ticks(99)};
  b.raw(worker, &te, sizeof(te));
  GpuGraphLaunchRecord g{{RecordKind::kGpuGraphLaunch, 0, sizeof(GpuGraphLaunchRecord)}, 6, b.ticks(70), b.ticks(80),
                         0, 0, 7, 3};
  b.raw(gpu, &g, sizeof(g));
  OverheadRecord o{{RecordKind::kCollectorOverhead, 0, sizeof(OverheadRecord)}, b.str("flush"), b.ticks(80),
                   b.ticks(85)};
  b.raw(gpu, &o, sizeof(o));
  b.drop(main, "buffer_full", 3);
}

// The shape UBSan found a signed overflow in (the analyzer's self time, issue 43): ranges of ~2^61 ns, the longest
// durations the reader's clock keeps, eight of them at one depth under an open parent, so their sum passes 2^63.
// Kept as fuzz/regressions/fuzz_analyze_dump/self-time-overflow, replayed by ctest in every build.
void self_time_overflow(const std::string& path) {
  dump::DumpBuilder b(path);
  const uint32_t t = b.thread("main", 1);
  const int64_t huge = int64_t(1) << 61;
  for (int i = 0; i < 8; ++i) b.range(t, "child", 1, 0, huge);
  b.range(t, "step", 0, 0, huge);
  b.finish();
}

// The shape that made the analyzer allocate gigabytes from 4.5 KB, CRC-valid: thread ids near 2^20 and 2^32, a
// code-table entry with id 2^24 - 1 and Python calls naming it (tests/unit/test_hostile_input.cpp builds the
// same). Mutations around it keep probing every table indexed by an id.
void hostile_ids(const std::filesystem::path& path) {
  std::vector<uint8_t> out;
  auto fh = dump::make_file_header();
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&fh), reinterpret_cast<uint8_t*>(&fh) + sizeof(fh));
  dump::ChunkBuilder s(dump::ChunkType::kStrings);
  s.add_string(1, "main");
  s.add_string(2, "f");
  s.finish_into(out);
  dump::ChunkBuilder code(dump::ChunkType::kCodeTable);
  code.add(dump::CodeEntry{1, 2, 2, 1});
  code.add(dump::CodeEntry{0x00ffffffu, 2, 2, 2});
  code.finish_into(out);
  dump::ChunkBuilder th(dump::ChunkType::kThreads);
  th.add(dump::ThreadEntry{0x000ffffeu, 7, 42, 1, 1000, 0, 0, 0});
  th.add(dump::ThreadEntry{0xfffffff0u, 8, 42, 1, 1000, 0, 0, 0});
  th.finish_into(out);
  for (uint32_t thread : {0x000ffffeu, 0xfffffff0u}) {
    dump::ChunkBuilder ev(dump::ChunkType::kEvents);
    dump::EventsHeader eh{thread, 0};
    ev.append(&eh, sizeof(eh));
    ev.add(RangeRecord{{RecordKind::kRange, 0, sizeof(RangeRecord)}, 1, 2000, 2050});
    ev.add(PyCallRecord{{RecordKind::kPyCall, 0, sizeof(PyCallRecord)}, 0x00ffffffu, 3000, 3100});
    ev.finish_into(out);
  }
  dump::ChunkBuilder end(dump::ChunkType::kEnd);
  end.add(dump::EndEntry{10'000, 4, 0});
  end.finish_into(out);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds OUTDIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  {
    dump::DumpBuilder b((dir / "full.iscope").string(), 2.5);
    full_trace(b);
    b.finish();
  }
  {
    dump::DumpBuilder b((dir / "small_chunks.iscope").string());
    b.set_chunk_bytes(64);  // many EVENTS chunks, strings and threads interleaved
    full_trace(b);
    b.finish();
  }
  {
    dump::DumpBuilder b((dir / "no_end.iscope").string());
    full_trace(b);
    b.finish(/*end_chunk=*/false);
  }
  {
    dump::DumpBuilder b((dir / "minimal.iscope").string());
    b.range(b.thread("t", 1), "r", 0, 0, 1);
    b.finish();
  }
  hostile_ids(dir / "hostile_ids.iscope");
  self_time_overflow((dir / "self_time_overflow.iscope").string());
  // A dump cut short in the middle of its last chunk, as after a crash.
  const std::string full = slurp(dir / "full.iscope");
  std::ofstream(dir / "truncated.iscope", std::ios::binary).write(full.data(), full.size() * 2 / 3);
  std::cout << "seed corpus in " << dir.string() << "\n";
  return 0;
}
