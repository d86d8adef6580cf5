// Process-wide string and code-object tables: names are interned once and the dump
// carries the table; records hold ids.
#include "runtime/runtime.hpp"
#include "runtime/session.hpp"

#include <chrono>
#include <deque>
#include <new>
#include <thread>
#include <memory>
#include <string>
#include <unordered_map>

namespace inferscope::runtime {
namespace {

struct CodeKey {
  uint32_t qualname, file, line;
  bool operator==(const CodeKey&) const = default;
};
struct CodeKeyHash {
  size_t operator()(const CodeKey& k) const {
    return (size_t(k.qualname) * 0x9E3779B97F4A7C15ull) ^ (size_t(k.file) << 21) ^ k.line;
  }
};

struct Tables {
  std::mutex mu;
  std::deque<std::string> strings{std::string()};  // id 0 is the empty/unknown name
  std::unordered_map<std::string_view, uint32_t> ids;
  std::vector<dump::CodeEntry> code;
  std::unordered_map<CodeKey, uint32_t, CodeKeyHash> code_ids;

  uint32_t intern_locked(std::string_view s) {
    auto it = ids.find(s);
    if (it != ids.end()) return it->second;
    strings.emplace_back(s);
    uint32_t id = static_cast<uint32_t>(strings.size() - 1);
    ids.emplace(strings.back(), id);
    return id;
  }
};

// Never destroyed: threads may still intern while the process exits.
Tables& tables() {
  static Tables* t = new Tables;
  return *t;
}

}  // namespace

// The table is held across fork(): a child made while another thread interns gets a whole table and a free
// lock, not a copy of a lock nobody in the child will ever release.
void strings_lock_for_fork() { tables().mu.lock(); }
void strings_unlock_after_fork(bool in_child) {
  if (in_child) new (&tables().mu) std::mutex;  // the locking thread's id means nothing in the child
  else tables().mu.unlock();
}

// Test hook: holds the table's lock for `ms` milliseconds on the calling thread.
void hold_strings_lock_for_test(uint32_t ms, const std::function<void()>& while_held) {
  std::lock_guard lk(tables().mu);
  while_held();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

uint32_t intern(std::string_view s) { return intern_view(s).first; }

std::pair<uint32_t, std::string_view> intern_view(std::string_view s) {
  if (s.empty()) return {0, {}};
  Tables& t = tables();
  std::lock_guard lk(t.mu);
  uint32_t id = t.intern_locked(s);
  return {id, t.strings[id]};  // deque elements never move
}

uint32_t intern_code(std::string_view qualname, std::string_view file, uint32_t line) {
  Tables& t = tables();
  std::lock_guard lk(t.mu);
  CodeKey k{t.intern_locked(qualname), t.intern_locked(file), line};
  auto it = t.code_ids.find(k);
  if (it != t.code_ids.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(t.code.size() + 1);
  t.code.push_back(dump::CodeEntry{id, k.qualname, k.file, line});
  t.code_ids.emplace(k, id);
  return id;
}

std::string string_of(uint32_t id) {
  Tables& t = tables();
  std::lock_guard lk(t.mu);
  return id < t.strings.size() ? t.strings[id] : std::string();
}

std::string code_qualname(uint32_t code_id) {
  Tables& t = tables();
  std::lock_guard lk(t.mu);
  if (code_id == 0 || code_id > t.code.size()) return {};  // ids count from 1 (intern_code)
  const uint32_t q = t.code[code_id - 1].qualname;
  return q < t.strings.size() ? t.strings[q] : std::string();
}

void strings_since(uint32_t first, const std::function<void(uint32_t, std::string_view)>& f, uint32_t* next) {
  Tables& t = tables();
  std::lock_guard lk(t.mu);
  uint32_t n = static_cast<uint32_t>(t.strings.size());
  for (uint32_t i = first; i < n; ++i) f(i, t.strings[i]);
  *next = n;
}

void code_since(uint32_t first, const std::function<void(const dump::CodeEntry&)>& f, uint32_t* next) {
  Tables& t = tables();
  std::lock_guard lk(t.mu);
  uint32_t n = static_cast<uint32_t>(t.code.size());
  for (uint32_t i = first; i < n; ++i) f(t.code[i]);
  *next = n;
}

std::string function_name_from_pretty(std::string_view p) {
  // "static R ns::C<T>::f(int) const [with T = int]" -> "ns::C<T>::f". The parameter list is the last
  // top-level '(' before any " [with"; the name runs back to the last top-level space.
  if (auto w = p.find(" [with"); w != std::string_view::npos) p = p.substr(0, w);
  size_t paren = std::string_view::npos;
  int depth = 0;
  for (size_t i = p.size(); i-- > 0;) {
    char c = p[i];
    if (c == ')') ++depth;
    else if (c == '(') {
      if (--depth == 0) {
        paren = i;
        break;
      }
    }
  }
  std::string_view head = paren == std::string_view::npos ? p : p.substr(0, paren);
  depth = 0;
  size_t start = 0;
  for (size_t i = head.size(); i-- > 0;) {
    char c = head[i];
    if (c == '>' || c == ')') ++depth;
    else if (c == '<' || c == '(') --depth;
    else if (c == ' ' && depth == 0) {
      start = i + 1;
      break;
    }
  }
  std::string out(head.substr(start));
  while (!out.empty() && (out[0] == '*' || out[0] == '&')) out.erase(0, 1);
  return out.empty() ? std::string(p) : out;
}

}  // namespace inferscope::runtime

namespace inferscope::detail {

uint32_t intern_static(const StaticName& n) noexcept {
  uint32_t id = n.is_function ? runtime::intern(runtime::function_name_from_pretty(n.text)) : runtime::intern(n.text);
  n.id.store(id, std::memory_order_relaxed);
  return id;
}

uint32_t intern_cached(const char* s, size_t len) noexcept {
  struct Entry {
    const char* key;
    std::string_view interned;
    uint32_t id;
  };
  // On the heap, not in TLS: the library's TLS block must stay small enough for glibc's static TLS surplus
  // (512 bytes by default), or dlopen (e.g. `import inferscope_py` without LD_PRELOAD) fails with "cannot
  // allocate memory in static TLS block", since t_state is initial-exec.
  static thread_local std::unique_ptr<Entry[]> cache;
  if (INFERSCOPE_UNLIKELY(!cache)) cache.reset(new Entry[64]());
  std::string_view text(s, len);
  Entry& e = cache[(reinterpret_cast<uintptr_t>(s) >> 3) & 63];
  // The pointer may since hold another string (a reused buffer): the interned text must still match.
  if (e.key == s && e.id != 0 && e.interned == text) return e.id;
  auto [id, view] = runtime::intern_view(text);
  e = Entry{s, view, id};
  return id;
}

}  // namespace inferscope::detail
