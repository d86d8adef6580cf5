// The one rule for what the analysing tools (iscope-analyze, iscope-diff) write, every output alike: -o, --md,
// --html, --json, --perfetto, --sqlite. Checked before anything is read, so a refused output costs nothing and
// nothing is written (exit 2, docs/cli.md). It is what --sqlite already did, made every output's: a report onto a
// FIFO nobody read blocked the tool for ever, and iscope-diff wrote over a child's dump.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace inferscope::tools {

/// One output as the command line named it: the flag as typed ("-o", "--json") and the file.
struct NamedOutput {
  std::string flag;
  std::string path;
  bool stdout_ok = true;  ///< "-" means standard output (false for --sqlite: a database is a file)
};

/// A file the tool reads: one named on its command line, or a child's dump beside a named dump (`child_of` names it).
struct InputFile {
  std::string path;
  std::string child_of;
};

/// Every file read for the inputs `named`: each, and beside each dump its children's dumps
/// (analyze::child_dump_candidates) unless `children` is false. iscope-diff does not analyse children, but an output
/// over one destroys the dump of a recorded process all the same.
std::vector<InputFile> files_read(const std::vector<std::string>& named, bool children = true);

/// Why `o` must not be written, "" when it may: an empty name; a name that is an option (`--json -o r.md`); "-"
/// where standard output is not possible; one of `inputs` (the same file however named: links, hard links, relative
/// paths); at the end of its symbolic links something other than a regular file (a FIFO, a device, a socket, a
/// directory) or a loop; a file on a kernel file system (/proc, /sys). The message names the flag; `file_flags`, the
/// tool's options that take a file name, for the message about an option taken for one.
std::string output_problem(const NamedOutput& o, const std::vector<InputFile>& inputs, std::string_view file_flags);

}  // namespace inferscope::tools
