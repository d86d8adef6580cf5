// The analyzer opens a parent dump with its children (iscope-run --follow-children): `<stem>.<pid>.iscope`
// beside it whose ppid is the parent's pid, each analysed on its own; other files are left alone.
#include "analyze/children.hpp"
#include "support/dump_builder.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace inferscope;

namespace {

void write_process_dump(const fs::path& p, const std::string& pid, const std::string& ppid, int kernels,
                        const std::vector<std::pair<std::string, std::string>>& more = {}) {
  dump::DumpBuilder b(p.string());
  b.process("pid", pid);
  b.process("ppid", ppid);
  for (const auto& [k, v] : more) b.process(k, v);
  b.process("cmdline", "worker " + pid);
  testsupport::Sim sim(b);
  for (int i = 0; i < 6; ++i)
    sim.range("step", [&] {
      for (int k = 0; k < kernels; ++k) sim.launch("gemm", 2'000'000);
      sim.sync();
    });
  b.finish();
}

}  // namespace

TEST_CASE("children: the parent's own child dumps, in pid order, analysed; strangers and unrelated names left out") {
  // An unreadable file named like a child is listed (with its error) only when the parent names that pid as a child.
  const fs::path dir = fs::path(INFERSCOPE_BINARY_DIR) / "tests" / "analyze" / "work" / "children";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The parent's system collector saw its child 203 (whose dump below cannot be read).
  write_process_dump(dir / "run.iscope", "100", "1", 4, {{"child.203.name", "worker"}});
  write_process_dump(dir / "run.205.iscope", "205", "100", 2);
  write_process_dump(dir / "run.201.iscope", "201", "100", 3);
  write_process_dump(dir / "run.300.iscope", "300", "999", 1);  // another run's child at the same stem
  write_process_dump(dir / "runner.202.iscope", "202", "100", 1);  // another stem
  { std::ofstream(dir / "run.203.iscope") << "not a dump"; }       // named like a child, unreadable
  { std::ofstream(dir / "run.204.iscope") << "not a dump"; }       // the same, of no child the parent names

  // Every file named like a child is read (its ppid at least): all of them are inputs a tool must not overwrite.
  std::vector<std::string> names;
  for (auto& c : analyze::child_dump_candidates((dir / "run.iscope").string())) names.push_back(fs::path(c).filename().string());
  CHECK(names == std::vector<std::string>{"run.201.iscope", "run.203.iscope", "run.204.iscope", "run.205.iscope",
                                          "run.300.iscope"});

  analyze::AnalyzeOptions o;
  analyze::Analysis parent = analyze::analyze_file((dir / "run.iscope").string(), o);
  auto kids = analyze::find_children((dir / "run.iscope").string(), parent, o);
  REQUIRE(kids.size() == 3);
  CHECK(kids[0].pid == 201);
  CHECK(kids[0].cmdline == "worker 201");
  CHECK(kids[0].complete);
  CHECK(kids[0].steps == 6);
  CHECK(kids[0].primary == "gpu_bound");
  CHECK(kids[0].error.empty());
  CHECK(kids[1].pid == 203);
  CHECK_FALSE(kids[1].error.empty());
  CHECK(kids[2].pid == 205);
  CHECK(kids[2].step_ms > 3.9);

  SUBCASE("a dump with no children, or not named .iscope, has none") {
    analyze::Analysis child = analyze::analyze_file((dir / "run.205.iscope").string(), o);
    CHECK(analyze::find_children((dir / "run.205.iscope").string(), child, o).empty());
  }
}
