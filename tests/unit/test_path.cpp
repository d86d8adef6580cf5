// dump::split_extension / insert_suffix: the one rule for "where does the extension start" that the
// runtime's per-process and snapshot dump names and iscope-analyze's format-by-extension share.
#include "dump/path.hpp"

#include <doctest/doctest.h>

using inferscope::dump::insert_suffix;
using inferscope::dump::split_extension;

TEST_CASE("split_extension: the last dot of the file name, never one in a directory") {
  CHECK(split_extension("run.iscope").stem == "run");
  CHECK(split_extension("run.iscope").ext == ".iscope");
  CHECK(split_extension("a/b.tar.gz").ext == ".gz");
  CHECK(split_extension("out.d/run").ext.empty());
  CHECK(split_extension("out.d/run").stem == "out.d/run");
  CHECK(split_extension("run").ext.empty());
  CHECK(split_extension("/tmp/.hidden").ext == ".hidden");
  CHECK(split_extension("Report.HTML").ext == ".HTML");
}

TEST_CASE("insert_suffix: before the extension, or at the end with the default extension") {
  CHECK(insert_suffix("out/run.iscope", "4242") == "out/run.4242.iscope");
  CHECK(insert_suffix("out.d/run", "4242") == "out.d/run.4242");
  CHECK(insert_suffix("out/run", "flush1", ".iscope") == "out/run.flush1.iscope");
  CHECK(insert_suffix("out/run.bin", "flush2", ".iscope") == "out/run.flush2.bin");
  CHECK(insert_suffix("report.md", "77") == "report.77.md");
}
