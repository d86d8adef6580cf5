// A real full disk (issue 18, docs/reliability.md "Files"): a small tmpfs that fills and then frees space leaves
// no torn chunk. Its own executable, apart from test_writer_files, because it needs to mount a tmpfs: where it
// cannot (no CAP_SYS_ADMIN, as in CI), it exits 77 with its reason and ctest reports it skipped, not passed,
// while the other writer cases still run.
#include <doctest/doctest.h>

#include "test_util.hpp"
#include "writer_test_support.hpp"

#include <inferscope/scope.hpp>

#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::writer_test;
namespace fs = std::filesystem;

TEST_CASE("a real full disk (a small tmpfs that fills, then frees space) leaves no torn chunk") {
  const std::string dir = testutil::temp_path("tmpfs");
  fs::create_directories(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=256k") != 0) {
    // Not a pass: ctest shows this test as skipped (exit 77, SKIP_RETURN_CODE), with the reason.
    std::fprintf(stderr, "SKIPPED: cannot mount a tmpfs at %s (%s: mounting needs CAP_SYS_ADMIN); "
                 "test_writer_files' injected-ENOSPC case covers the same path\n", dir.c_str(), std::strerror(errno));
    std::fflush(stderr);
    std::exit(77);
  }
  const std::string filler = dir + "/filler";
  {
    std::FILE* f = std::fopen(filler.c_str(), "wb");
    REQUIRE(f);
    std::vector<char> block(4096, 'x');
    for (int i = 0; i < 44; ++i) std::fwrite(block.data(), 1, block.size(), f);  // 176 KiB of 256
    std::fclose(f);
  }
  const std::string out = dir + "/full.iscope";
  REQUIRE(start(config_for(out)));
  RECORD("tick", 6000);  // ~6000 * 24 bytes: more than the 80 KiB left
  fs::remove(filler);
  RECORD("tick", 3000);
  const bool stopped = stop();
  check_torn_free(out, 9000, "tick");
  CHECK(stopped);
  ::umount2(dir.c_str(), MNT_DETACH);
}
