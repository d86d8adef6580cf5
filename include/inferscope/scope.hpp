// InferScope's whole C++ annotation API.
//
//   #include <inferscope/scope.hpp>
//
//   void handle(Request& r) {
//     ISCOPE_FUNC();                                   // range named after the enclosing function
//     { ISCOPE_RANGE("tokenize"); tokenize(r); }       // a named range: a timestamp and a store
//     ISCOPE_RANGE_ATTRS("batch", {"size", 32}, {"model", "gpt2"});   // attributes, free while off
//     inferscope::mark_event("batch_full", {{"size", 32}});           // an instant event
//   }
//
//   int main() {
//     inferscope::Session session;   // or INFERSCOPE_ENABLE=1 in the environment, no code at all
//     ...
//   }                                // the dump is complete when the session ends (or the process exits)
//
// Ranges are complete records written at their end. A stopped session costs one
// relaxed atomic load per annotation; defining ISCOPE_DISABLE compiles every macro and call to nothing and
// references no symbol of the library.
#pragma once

#include <inferscope/config.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#ifndef ISCOPE_DISABLE
#include <inferscope/internal/hot_path.hpp>
#endif

namespace inferscope {

/// An attribute value: integer, floating point, boolean or string.
struct Attribute {
  enum class Type : uint8_t { kInt, kDouble, kBool, kString };
  const char* key;
  Type type;
  int64_t i = 0;
  double d = 0;
  std::string_view s;

  Attribute(const char* k, int v) noexcept : key(k), type(Type::kInt), i(v) {}
  Attribute(const char* k, long v) noexcept : key(k), type(Type::kInt), i(v) {}
  Attribute(const char* k, long long v) noexcept : key(k), type(Type::kInt), i(v) {}
  Attribute(const char* k, unsigned v) noexcept : key(k), type(Type::kInt), i(v) {}
  Attribute(const char* k, unsigned long v) noexcept : key(k), type(Type::kInt), i(static_cast<int64_t>(v)) {}
  Attribute(const char* k, unsigned long long v) noexcept : key(k), type(Type::kInt), i(static_cast<int64_t>(v)) {}
  Attribute(const char* k, double v) noexcept : key(k), type(Type::kDouble), d(v) {}
  Attribute(const char* k, bool v) noexcept : key(k), type(Type::kBool), i(v) {}
  Attribute(const char* k, const char* v) noexcept : key(k), type(Type::kString), s(v) {}
  Attribute(const char* k, std::string_view v) noexcept : key(k), type(Type::kString), s(v) {}
  Attribute(const char* k, const std::string& v) noexcept : key(k), type(Type::kString), s(v) {}
};

#ifndef ISCOPE_DISABLE

/// Starts recording with `config` (its `enable` field is ignored: calling start is the intent). Every field the
/// code set (one that differs from a default Config) wins; every other setting comes from the environment
/// (INFERSCOPE_*), then .inferscope.yaml, then the defaults, so an operator can redirect or reconfigure the
/// program without a rebuild (docs/configuration.md, "Sessions started in code"). Returns false, with one line on
/// stderr saying why, when a session is already running, a setting from outside is invalid, or the output
/// cannot be opened.
INFERSCOPE_API bool start(const Config& config = Config{});
/// Starts recording with exactly `config`: nothing is read from the environment or .inferscope.yaml. For a
/// program that must not be reconfigured from outside, or that resolved its settings itself.
INFERSCOPE_API bool start_exactly(const Config& config);
/// Stops recording and writes a complete dump. Returns false when no session was running, or when the dump
/// could not be written whole (a full disk, an END chunk that failed): stderr says which.
INFERSCOPE_API bool stop();
/// Whether a session is recording.
INFERSCOPE_API bool is_active() noexcept;
/// Path of the dump the running (or last) session writes, made absolute when it started (a relative output is
/// resolved against the working directory of that moment, so chdir() afterwards does not move it).
INFERSCOPE_API std::string output_path();
/// Ring or sampled mode: writes what the ring holds (the flight recorder's window, or the kept sampled windows)
/// to "<output stem>.flush<N>.iscope" and returns that path; recording goes on. SIGUSR2 does the same. Returns ""
/// when no ring-mode or sampled-mode session is running.
INFERSCOPE_API std::string flush_ring();
/// Names the calling thread in the dump (and for later sessions).
INFERSCOPE_API void set_thread_name(std::string_view name) noexcept;
/// An instant event on the calling thread.
INFERSCOPE_API void mark_event(std::string_view name, std::initializer_list<Attribute> attrs = {}) noexcept;

/// A recording session for the lifetime of the object.
class Session {
 public:
  explicit Session(const Config& config = Config{}) : ok_(inferscope::start(config)) {}
  ~Session() {
    if (ok_) inferscope::stop();
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  bool ok_;
};

namespace detail {
INFERSCOPE_API void write_range_attrs(ThreadRing* r, uint32_t name, uint32_t depth, uint64_t start, uint64_t end,
                                      const AttrRecord* attrs, uint32_t n) noexcept;
INFERSCOPE_API void fill_attr(AttrRecord& out, const Attribute& a) noexcept;
/// Set in ScopedRange's attribute count when the range also pushed an NVTX range (Config::nvtx_emit).
inline constexpr uint32_t kRangeNvtxFlag = 1u << 31;
/// Pushes an NVTX range named `name` (Config::nvtx_emit; the GPU collector provides the NVTX side).
INFERSCOPE_API void nvtx_range_push(const StaticName& name) noexcept;
/// The end of a range with attributes or an NVTX range (begun in session `epoch`): `flags` = attribute
/// count | kRangeNvtxFlag.
INFERSCOPE_API void end_range_slow(uint32_t epoch, uint32_t name, uint32_t depth, uint64_t start, uint64_t end,
                                   const AttrRecord* attrs, uint32_t flags) noexcept;
}  // namespace detail

/// A range on the current thread for the lifetime of the object. Use the macros; the object cannot be
/// copied, moved or allocated on the heap, so it cannot outlive its scope or end on another thread (use
/// AsyncRange for that).
class ScopedRange {
 public:
  static constexpr uint32_t kMaxAttrs = 4;

  explicit ScopedRange(const detail::StaticName& name) noexcept {
    const uint32_t e = detail::g_session.load(std::memory_order_relaxed);
    if (INFERSCOPE_LIKELY(e == 0)) return;
    begin(e, name);
  }
  ~ScopedRange() {
    if (start_ != 0) end();
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
  ScopedRange(ScopedRange&&) = delete;
  ScopedRange& operator=(ScopedRange&&) = delete;
  static void* operator new(size_t) = delete;
  static void* operator new[](size_t) = delete;

  /// Whether this range records (a session was running when it began).
  bool active() const noexcept { return start_ != 0; }
  /// Attaches an attribute (at most kMaxAttrs; later ones are ignored). Free while not recording.
  void attr(const Attribute& a) noexcept {
    if (start_ != 0 && (nattrs_ & ~detail::kRangeNvtxFlag) < kMaxAttrs)
      detail::fill_attr(attrs_[(nattrs_++) & ~detail::kRangeNvtxFlag], a);
  }
  void attrs(std::initializer_list<Attribute> list) noexcept {
    for (const auto& a : list) attr(a);
  }

 private:
  void begin(uint32_t e, const detail::StaticName& name) noexcept {
    detail::ThreadState& ts = detail::t_state;
    if (ts.epoch != e && !detail::bind_thread(e)) return;
    uint32_t id = name.id.load(std::memory_order_relaxed);
    if (INFERSCOPE_UNLIKELY(id == 0)) id = detail::intern_static(name);
    name_ = id;
    epoch_ = e;
    depth_ = ts.depth++;
    // Config::nvtx_emit: the one extra (predictable) branch of a recording range; the end pays nothing
    // extra because the flag rides in nattrs_, which end() tests anyway.
    if (INFERSCOPE_UNLIKELY(detail::g_nvtx_emit.load(std::memory_order_relaxed))) {
      detail::nvtx_range_push(name);
      nattrs_ = detail::kRangeNvtxFlag;
    }
    start_ = detail::now();
  }
  void end() noexcept {
    const uint64_t end = detail::now();
    detail::ThreadState& ts = detail::t_state;
    --ts.depth;
    // Attributes or an NVTX range to pop: end_range_slow also makes the session check below.
    if (INFERSCOPE_UNLIKELY(nattrs_ != 0))
      return detail::end_range_slow(epoch_, name_, depth_, start_, end, attrs_, nattrs_);
    // A session that stopped (or restarted) while the range was open: the range is not part of it.
    if (INFERSCOPE_UNLIKELY(epoch_ != detail::g_session.load(std::memory_order_relaxed))) return;
    detail::write_range(ts.ring, RecordKind::kRange, name_, depth_, start_, end);
    detail::note_step(name_, start_, end);
  }

  uint64_t start_ = 0;
  uint32_t name_;
  uint32_t epoch_;
  uint32_t depth_;
  uint32_t nattrs_ = 0;
  AttrRecord attrs_[kMaxAttrs];
};

/// A span that may begin on one thread and end on another (an async request). Movable; ends at end() or
/// when destroyed. Records nothing when no session was running at its beginning.
class AsyncRange {
 public:
  AsyncRange() noexcept = default;
  INFERSCOPE_API explicit AsyncRange(std::string_view name) noexcept;
  AsyncRange(AsyncRange&& o) noexcept { *this = static_cast<AsyncRange&&>(o); }
  AsyncRange& operator=(AsyncRange&& o) noexcept {
    if (this != &o) {
      end();
      start_ = o.start_, name_ = o.name_, id_ = o.id_, begin_thread_ = o.begin_thread_, epoch_ = o.epoch_;
      o.start_ = 0;
    }
    return *this;
  }
  AsyncRange(const AsyncRange&) = delete;
  AsyncRange& operator=(const AsyncRange&) = delete;
  ~AsyncRange() { end(); }

  /// Ends the span on the calling thread; later calls do nothing.
  INFERSCOPE_API void end() noexcept;
  bool active() const noexcept { return start_ != 0; }
  uint64_t id() const noexcept { return id_; }

 private:
  uint64_t start_ = 0;
  uint64_t id_ = 0;
  uint32_t name_ = 0;
  uint32_t begin_thread_ = 0;
  uint32_t epoch_ = 0;
};

#else  // ISCOPE_DISABLE: the same API, inline and empty; no library symbol is referenced.

inline bool start(const Config& = Config{}) { return false; }
inline bool start_exactly(const Config&) { return false; }
inline bool stop() { return false; }
inline bool is_active() noexcept { return false; }
inline std::string output_path() { return {}; }
inline std::string flush_ring() { return {}; }
inline void set_thread_name(std::string_view) noexcept {}
inline void mark_event(std::string_view, std::initializer_list<Attribute> = {}) noexcept {}
class Session {
 public:
  explicit Session(const Config& = Config{}) {}
  bool ok() const noexcept { return false; }
};
class ScopedRange {
 public:
  bool active() const noexcept { return false; }
  void attr(const Attribute&) noexcept {}
  void attrs(std::initializer_list<Attribute>) noexcept {}
};
class AsyncRange {
 public:
  AsyncRange() noexcept = default;
  explicit AsyncRange(std::string_view) noexcept {}
  void end() noexcept {}
  bool active() const noexcept { return false; }
  uint64_t id() const noexcept { return 0; }
};

#endif

}  // namespace inferscope

#define ISCOPE_CONCAT_INNER_(a, b) a##b
#define ISCOPE_CONCAT_(a, b) ISCOPE_CONCAT_INNER_(a, b)

#ifndef ISCOPE_DISABLE
#define ISCOPE_RANGE_VAR_IMPL_(var, text, is_func, n)                                           \
  static const ::inferscope::detail::StaticName ISCOPE_CONCAT_(isc_name_, n){text, is_func}; \
  ::inferscope::ScopedRange var { ISCOPE_CONCAT_(isc_name_, n) }

/// A range named `name` (a string literal) until the end of the enclosing scope.
#define ISCOPE_RANGE(name) ISCOPE_RANGE_VAR_IMPL_(ISCOPE_CONCAT_(isc_range_, __LINE__), name, false, __COUNTER__)
/// A range named after the enclosing function ("ns::Class::method"), registered once per call site.
#define ISCOPE_FUNC() \
  ISCOPE_RANGE_VAR_IMPL_(ISCOPE_CONCAT_(isc_range_, __LINE__), __PRETTY_FUNCTION__, true, __COUNTER__)
/// A range held in variable `var`, so attributes can be added later: var.attr({"batch", n}).
#define ISCOPE_RANGE_VAR(var, name) ISCOPE_RANGE_VAR_IMPL_(var, name, false, __COUNTER__)
/// A range with attributes: ISCOPE_RANGE_ATTRS("decode", {"batch", 32}, {"model", "gpt2"}). The attribute
/// expressions are evaluated only while a session records.
#define ISCOPE_RANGE_ATTRS(name, ...)                                 \
  ISCOPE_RANGE_VAR(ISCOPE_CONCAT_(isc_range_, __LINE__), name);       \
  if (ISCOPE_CONCAT_(isc_range_, __LINE__).active())                  \
  ISCOPE_CONCAT_(isc_range_, __LINE__).attrs({__VA_ARGS__})
/// An instant event whose attributes are evaluated only while a session records.
#define ISCOPE_MARK(name, ...)                                                         \
  do {                                                                                 \
    if (::inferscope::detail::g_session.load(::std::memory_order_relaxed) != 0)       \
      ::inferscope::mark_event(name, {__VA_ARGS__});                                   \
  } while (0)
#else
#define ISCOPE_RANGE(name) static_cast<void>(0)
#define ISCOPE_FUNC() static_cast<void>(0)
#define ISCOPE_RANGE_VAR(var, name) ::inferscope::ScopedRange var
#define ISCOPE_RANGE_ATTRS(name, ...) static_cast<void>(0)
#define ISCOPE_MARK(name, ...) static_cast<void>(0)
#endif
