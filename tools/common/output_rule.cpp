#include "output_rule.hpp"

#include "analyze/analyzer.hpp"
#include "analyze/children.hpp"
#include "dump/files.hpp"

#include <sys/stat.h>

namespace inferscope::tools {

namespace {

// What is at the end of `path`'s links that is not a file to write, "" when it is one or nothing is there yet.
std::string not_a_file(const std::string& path) {
  const dump::OutputTarget t = dump::resolve_output(path);
  if (!t.error.empty()) return "is a symbolic link loop (or a chain too long to follow)";
  if (t.mode && !S_ISREG(t.mode))
    return "is " + dump::file_kind(t.mode) + (t.path == path ? "" : " (reached through " + path + ")") +
           "; reports and exports are written to regular files only (- for standard output)";
  if (auto why = dump::on_kernel_filesystem(t.path)) return *why;
  return "";
}

}  // namespace

std::string output_problem(const NamedOutput& o, const std::vector<InputFile>& inputs, std::string_view file_flags) {
  const std::string named = o.flag + " " + o.path;
  if (o.path.empty()) return o.flag + ": an empty file name; name the file to write" + (o.stdout_ok ? " (- for stdout)" : "");
  if (o.path == "-")
    return o.stdout_ok ? "" : named + ": a database cannot be written to standard output; name a file";
  if (o.path.size() > 1 && o.path[0] == '-')  // `--json -o r.md`: the report would land in a file named "-o"
    return named + ": is an option: the output file name '" + o.path + "' is an option: an option that takes a file " +
           "name (" + std::string(file_flags) + ") was followed by another option; give the file name after " + o.flag +
           " (a file named so: ./" + o.path + ")";
  for (const InputFile& in : inputs)
    if (dump::same_file(o.path, in.path))
      return named + ": is the input " + in.path +
             (in.child_of.empty() ? " itself" : " (a child process's dump, read with " + in.child_of + ")") +
             "; refusing to overwrite it (name another output file)";
  if (const std::string why = not_a_file(o.path); !why.empty()) return named + ": " + why;
  return "";
}

std::vector<InputFile> files_read(const std::vector<std::string>& named, bool children) {
  std::vector<InputFile> out;
  for (const std::string& p : named) out.push_back({p, ""});
  for (const std::string& p : named) {
    if (!children) break;
    bool dump = false;
    try {
      dump = analyze::input_format(p) == analyze::InputFormat::kDump;
    } catch (const std::exception&) {  // unreadable: the analysis says why
    }
    if (!dump) continue;
    for (std::string& c : analyze::child_dump_candidates(p)) out.push_back({std::move(c), p});
  }
  return out;
}

}  // namespace inferscope::tools
