// Reading a small YAML file the user wrote (the settings file, the rule file): bounded, never blocking, one document.
#include "config/yaml_file.hpp"

#include <yaml-cpp/eventhandler.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace inferscope::config {
namespace {

std::string size_text(size_t bytes) {
  if (bytes >= (size_t(1) << 20) && bytes % (size_t(1) << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Records where each document starts and where its root node is; nothing else of the events is needed.
struct DocumentMarks : YAML::EventHandler {
  std::vector<YAML::Mark> starts, roots;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { root(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { root(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { root(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    root(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    root(mark);
  }
  void OnMapEnd() override {}

 private:
  void root(const YAML::Mark& mark) {
    if (roots.size() < starts.size()) roots.push_back(mark);
  }
};

}  // namespace

std::string_view yaml_node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Null: return "nothing";
    default: return "a single value";
  }
}

// yaml-cpp 0.7 accepts a quoted scalar left open at the end of the file, silently swallowing every line after
// the quote into one string ("step: \"open" then "enable: true" becomes step = "open enable: true"). Re-scan
// the source from the node's opening quote to find its closing one.
bool is_unterminated_quote(const std::string& source, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (!node.IsScalar() || mark.pos < 0 || static_cast<size_t>(mark.pos) >= source.size()) return false;
  const char quote = source[mark.pos];
  if (quote != '"' && quote != '\'') return false;
  for (size_t i = mark.pos + 1; i < source.size(); ++i) {
    if (quote == '"' && source[i] == '\\') {
      ++i;  // an escaped character, possibly an escaped quote
    } else if (source[i] == quote) {
      if (quote == '\'' && i + 1 < source.size() && source[i + 1] == '\'') {
        ++i;  // '' is an escaped single quote
      } else {
        return false;
      }
    }
  }
  return true;
}

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Only a regular file of at most `max_bytes` is read. A FIFO named by INFERSCOPE_CONFIG blocked every tool, and
// every program started with INFERSCOPE_ENABLE=1, until some writer came; /dev/zero was read until memory ran out (then
// std::bad_alloc ended the process); a directory read as an empty config. The file is opened O_NONBLOCK and its
// kind taken from the open descriptor, so no FIFO can block and nothing can be swapped in after the check.
std::optional<std::string> read_small_file(const std::string& path, const std::string& what, size_t max_bytes,
                                           const char* too_large_hint, std::string& problem) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    problem = "cannot read " + what + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    ::close(fd);
    problem = st.st_mode ? what + ": is " + file_kind(st.st_mode) + ", not a regular file (name a YAML file)"
                         : "cannot read " + what + ": " + std::strerror(e);
    return std::nullopt;
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      problem = "cannot read " + what + ": " + std::strerror(e);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {  // a file still growing is stopped here too
      ::close(fd);
      problem = what + ": larger than " + size_text(max_bytes) + "; " + too_large_hint;
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

// The file's one document; a second one is refused rather than ignored (its root's mark in `second`). Not
// YAML::LoadAll: yaml-cpp 0.7 never returns from it on a ',' outside a [ ] or { } collection (",", "- a\n,\n- b"),
// whose parser stops advancing while LoadAll adds an empty document per turn until memory runs out; fuzz_config
// found a 1-byte config file hanging every tool. So the documents are walked with the event parser, at most three,
// and one that starts where the one before it started is the syntax error it is. Throws YAML::ParserException.
YAML::Node load_one_document(const std::string& source, std::optional<YAML::Mark>& second) {
  std::istringstream in(source);
  YAML::Parser parser(in);
  DocumentMarks marks;
  while (marks.starts.size() < 3 && parser.HandleNextDocument(marks)) {
    const std::vector<YAML::Mark>& s = marks.starts;
    if (s.size() >= 2 && s[s.size() - 1].pos == s[s.size() - 2].pos) {
      const char c = static_cast<size_t>(s.back().pos) < source.size() ? source[s.back().pos] : ' ';
      throw YAML::ParserException(s.back(), std::string("unexpected '") + c + "'" +
                                                (c == ',' ? " (a comma separates items only inside [ ] or { })" : ""));
    }
  }
  if (marks.roots.size() > 1) second = marks.roots[1];
  return YAML::Load(source);
}

}  // namespace inferscope::config
