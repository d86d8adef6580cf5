#include "library.hpp"

#include "paths.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace iscope_run {
namespace {

// The build tree's paths are compiled in for the iscope-run that sits in the build tree. A copy installed or
// moved elsewhere never falls back to them: a stale build would be loaded into the user's program.
bool in_build_tree() {
  char a[PATH_MAX] = {}, b[PATH_MAX] = {};
  return ::realpath(exe_dir().c_str(), a) && ::realpath(INFERSCOPE_BUILD_EXE_DIR, b) && std::strcmp(a, b) == 0;
}

// The install's library directory seen from this executable's: ../lib64 for a relative CMAKE_INSTALL_LIBDIR, that
// directory itself for an absolute one.
std::string install_libdir(const std::string& dir) {
  const std::string libdir = INFERSCOPE_INSTALL_LIBDIR;
  return libdir.starts_with("/") ? libdir : dir + "/../" + libdir;
}

void prepend(const char* var, const std::string& value, char sep) {
  const char* old = std::getenv(var);
  std::string v = value;
  if (old && *old) v += std::string(1, sep) + old;
  ::setenv(var, v.c_str(), 1);
}

// Reads `n` bytes at `offset`; false when the file is shorter.
bool read_at(int fd, void* to, size_t n, off_t offset) { return ::pread(fd, to, n, offset) == static_cast<ssize_t>(n); }

// What the ELF header says that rules out preloading into a program like this one ("" when nothing does).
std::string header_problem(const Elf64_Ehdr& h, const Elf64_Ehdr& ours) {
  if (h.e_ident[EI_CLASS] != ours.e_ident[EI_CLASS])
    return h.e_ident[EI_CLASS] == ELFCLASS32 ? "a 32-bit ELF file; programs here load 64-bit libraries"
                                            : "an ELF file of another class than the programs here";
  if (h.e_ident[EI_DATA] != ours.e_ident[EI_DATA]) return "an ELF file of the other byte order";
  if (h.e_machine != ours.e_machine)
    return "built for another machine (ELF machine " + std::to_string(h.e_machine) + ", here " +
           std::to_string(ours.e_machine) + ")";
  if (h.e_type == ET_EXEC) return "an executable, not a shared library";
  if (h.e_type == ET_REL) return "a relocatable object (.o), not a shared library";
  if (h.e_type != ET_DYN) return "an ELF file of type " + std::to_string(h.e_type) + ", not a shared library";
  return "";
}

// A shared object by type (ET_DYN) may still be a position-independent executable, which glibc refuses to load
// ("cannot dynamically load position independent executable"): DF_1_PIE in its dynamic section says so.
std::string dynamic_problem(int fd, const Elf64_Ehdr& h) {
  for (unsigned i = 0; i < h.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!read_at(fd, &ph, sizeof(ph), static_cast<off_t>(h.e_phoff + uint64_t(i) * h.e_phentsize)))
      return "a truncated ELF file (its program headers end early)";
    if (ph.p_type != PT_DYNAMIC) continue;
    for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= ph.p_filesz; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d{};
      if (!read_at(fd, &d, sizeof(d), static_cast<off_t>(ph.p_offset + at)) || d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_PIE))
        return "a position-independent executable, not a shared library";
    }
    return "";
  }
  return "an ELF file without a dynamic section, not a shared library";
}

// This executable's own ELF header: the class, byte order and machine a preloaded library must share.
bool own_header(Elf64_Ehdr& h) {
  const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = read_at(fd, &h, sizeof(h), 0);
  ::close(fd);
  return ok;
}

// Why the regular file open at `fd` is not a shared library this program's children can preload ("" when it is).
std::string elf_problem(int fd) {
  Elf64_Ehdr h{}, ours{};
  const ssize_t n = ::pread(fd, &h, sizeof(h), 0);
  if (n < static_cast<ssize_t>(SELFMAG) || std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
    return "not an ELF file (no ELF header), so not a shared library";
  if (n < static_cast<ssize_t>(sizeof(h))) return "a truncated ELF file (its header ends early)";
  if (!own_header(ours)) return "";  // nothing to compare with: the loader will say
  if (std::string why = header_problem(h, ours); !why.empty()) return why;
  return dynamic_problem(fd, h);
}

}  // namespace

std::string find_library() {
  if (const char* e = std::getenv("INFERSCOPE_LIBRARY"); e && *e) return absolute(e);
  const std::string dir = exe_dir();
  std::vector<std::string> where;
  for (const std::string& d : {dir, install_libdir(dir), dir + "/../lib"})
    for (const char* name : {"libinferscope.so", INFERSCOPE_SONAME}) where.push_back(d + "/" + name);
  if (in_build_tree()) where.push_back(INFERSCOPE_BUILD_LIBRARY);
  for (const std::string& c : where)
    if (exists(c)) return c;
  return {};
}

std::string not_loadable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::string("cannot be opened: ") + std::strerror(errno);
  struct stat st{};
  std::string why;
  if (::fstat(fd, &st) != 0) why = std::string("cannot be read: ") + std::strerror(errno);
  else if (S_ISDIR(st.st_mode)) why = "a directory, not a shared library";
  else if (!S_ISREG(st.st_mode)) why = "not a regular file, so not a shared library";
  else why = elf_problem(fd);
  ::close(fd);
  return why;
}

std::string find_python_dir() {
  if (const char* e = std::getenv("INFERSCOPE_PYTHON_DIR"); e && *e) return exists(e) ? absolute(e) : std::string();
  const std::string dir = exe_dir();
  std::vector<std::string> where{install_libdir(dir) + "/inferscope/python", dir + "/../lib/inferscope/python"};
  if (in_build_tree()) where.push_back(INFERSCOPE_BUILD_PYTHON_DIR);
  for (const std::string& c : where)
    if (exists(c)) return c;
  return {};
}

// LD_PRELOAD splits its value at spaces and colons, so a library under "/opt/my tools/lib" cannot be named
// there. A bare file name is searched along LD_LIBRARY_PATH, which splits at colons only: the directory goes
// there instead.
void preload(const std::string& library) {
  if (library.find_first_of(" \t") == std::string::npos) {
    prepend("LD_PRELOAD", library, ':');
    return;
  }
  const size_t slash = library.rfind('/');
  prepend("LD_LIBRARY_PATH", library.substr(0, slash), ':');
  prepend("LD_PRELOAD", library.substr(slash + 1), ':');
}

}  // namespace iscope_run
