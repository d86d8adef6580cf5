#include "proto_trace.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace inferscope::bench {
namespace {

namespace json = boost::json;

// Field numbers of protos/perfetto/trace/{trace,trace_packet}.proto, track_event/*.proto and
// interned_data/interned_data.proto.
namespace f {
constexpr uint32_t kTracePacket = 1;                                                    // Trace
constexpr uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInterned = 12;  // TracePacket
constexpr uint32_t kSequenceFlags = 13, kTrackDescriptor = 60;
constexpr uint32_t kCategoryIids = 3, kAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11;  // TrackEvent
constexpr uint32_t kCounterValue = 30, kDoubleCounterValue = 44, kFlowIds = 47, kTerminatingFlowIds = 48;
constexpr uint32_t kUuid = 1, kName = 2, kProcess = 3, kThread = 4, kParentUuid = 5, kCounter = 8;  // TrackDescriptor
constexpr uint32_t kPid = 1, kProcessName = 6;                                   // ProcessDescriptor
constexpr uint32_t kTid = 2, kThreadName = 5;                                    // ThreadDescriptor (pid = 1)
constexpr uint32_t kAnnName = 1, kBool = 2, kUint = 3, kInt = 4, kDouble = 5;    // DebugAnnotation
constexpr uint32_t kString = 6, kNested = 8, kStringIid = 17;
constexpr uint32_t kNestedType = 1, kArrayValues = 4, kNestedInt = 5, kNestedDouble = 6, kNestedString = 8;
constexpr uint32_t kEventCategories = 1, kEventNames = 2, kAnnotationNames = 3, kAnnotationStrings = 29;
constexpr uint32_t kIid = 1, kEntryName = 2;  // EventName, EventCategory, DebugAnnotationName; InternedString str = 2
}  // namespace f

constexpr uint64_t kSeqIncrementalStateCleared = 1, kSeqNeedsIncrementalState = 2;
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounterEvent = 4;
constexpr uint64_t kNestedArray = 2;
constexpr uint32_t kSequence = 1;

/// A protobuf message being written: fields appended in order.
class Msg {
 public:
  Msg& u(uint32_t field, uint64_t v) {
    tag(field, 0);
    varint(v);
    return *this;
  }
  Msg& i(uint32_t field, int64_t v) { return u(field, static_cast<uint64_t>(v)); }
  Msg& d(uint32_t field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return fixed64(field, bits);
  }
  Msg& fixed64(uint32_t field, uint64_t v) {
    tag(field, 1);
    for (int k = 0; k < 8; ++k) b_ += static_cast<char>(v >> (8 * k));
    return *this;
  }
  Msg& s(uint32_t field, std::string_view v) {
    tag(field, 2);
    varint(v.size());
    b_.append(v);
    return *this;
  }
  Msg& m(uint32_t field, const Msg& sub) { return s(field, sub.b_); }
  bool empty() const { return b_.empty(); }
  const std::string& bytes() const { return b_; }

 private:
  void tag(uint32_t field, uint32_t wire) { varint(uint64_t(field) << 3 | wire); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      b_ += static_cast<char>(v | 0x80);
      v >>= 7;
    }
    b_ += static_cast<char>(v);
  }
  std::string b_;
};

std::string text(const json::value* v) {
  if (!v) return "";
  return v->is_string() ? std::string(v->as_string()) : json::serialize(*v);
}
int64_t integer(const json::value* v) { return v && v->is_number() ? v->to_number<int64_t>() : 0; }
/// Trace-event microseconds (3 decimals) as nanoseconds.
int64_t ns(const json::value* v) { return v && v->is_number() ? std::llround(v->to_number<double>() * 1000) : 0; }

struct Slice {
  int64_t start = 0, end = 0;
  size_t order = 0;  ///< position in the JSON, the last tie-breaker
  const json::object* event = nullptr;
  bool instant = false;
  std::vector<uint64_t> flows_out, flows_in;
};

struct Track {
  uint64_t uuid = 0, parent = 0;
  std::string name;
  int64_t pid = 0, tid = 0;
  bool thread = false, counter = false;
  std::vector<Slice> slices;
  std::vector<std::pair<int64_t, const json::value*>> samples;  ///< counters: (ts, value)
};

class Encoder {
 public:
  Encoder(const ProtoOptions& o, ProtoStats& s) : opt_(o), stats_(s) {}

  std::string run(const json::array& events) {
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].is_object()) collect(events[i].as_object(), i);
    describe();
    for (auto& [key, t] : slice_tracks_) emit_slices(t);
    for (auto& [key, t] : async_tracks_) emit_slices(t);
    for (auto& [key, t] : counter_tracks_) emit_samples(t);
    return out_;
  }

 private:
  using ThreadKey = std::pair<int64_t, int64_t>;

  // --- pass over the JSON ------------------------------------------------------------------------------
  void collect(const json::object& e, size_t order) {
    const std::string ph = text(e.if_contains("ph"));
    const int64_t pid = integer(e.if_contains("pid")), tid = integer(e.if_contains("tid"));
    const std::string name = text(e.if_contains("name"));
    processes_.try_emplace(pid);
    if (ph == "M") return metadata(e, pid, tid, name);
    const int64_t ts = ns(e.if_contains("ts"));
    if (ph == "X" || ph == "i" || ph == "I") {
      Track& t = thread_track(pid, tid);
      const bool instant = ph != "X";
      t.slices.push_back({ts, instant ? ts : ts + ns(e.if_contains("dur")), order, &e, instant, {}, {}});
      last_slice_[{pid, tid}] = t.slices.size() - 1;
    } else if (ph == "s" || ph == "f") {
      flow(pid, tid, ph == "s", static_cast<uint64_t>(integer(e.if_contains("id"))));
    } else if (ph == "C") {
      Track& t = counter_tracks_[{pid, name}];
      t.pid = pid;
      t.name = name;
      t.counter = true;
      if (const json::value* a = e.if_contains("args"); a && a->is_object() && !a->as_object().empty())
        t.samples.emplace_back(ts, &a->as_object().begin()->value());
    } else if (ph == "b" || ph == "e") {
      async(e, pid, name, ph == "b", ts, order);
    }
  }

  void metadata(const json::object& e, int64_t pid, int64_t tid, const std::string& what) {
    const json::value* a = e.if_contains("args");
    const std::string name = a && a->is_object() ? text(a->as_object().if_contains("name")) : "";
    if (what == "process_name") processes_[pid] = name;
    if (what == "thread_name") thread_track(pid, tid).name = name;
  }

  Track& thread_track(int64_t pid, int64_t tid) {
    Track& t = slice_tracks_[{pid, tid}];
    t.pid = pid;
    t.tid = tid;
    t.thread = true;
    return t;
  }

  void flow(int64_t pid, int64_t tid, bool start, uint64_t id) {
    // The writer puts each flow event right after the slice it binds to, on the same track.
    const auto last = last_slice_.find({pid, tid});
    if (last == last_slice_.end()) return;
    Slice& s = slice_tracks_[{pid, tid}].slices[last->second];
    (start ? s.flows_out : s.flows_in).push_back(id);
    if (start) ++stats_.flows;
  }

  void async(const json::object& e, int64_t pid, const std::string& name, bool begin, int64_t ts, size_t order) {
    const auto key = std::make_tuple(pid, text(e.if_contains("cat")), text(e.if_contains("id")), name);
    Track& t = async_tracks_[key];
    t.pid = pid;
    t.name = name;
    if (begin) {
      t.slices.push_back({ts, ts, order, &e, false, {}, {}});
    } else {
      for (auto it = t.slices.rbegin(); it != t.slices.rend(); ++it)
        if (it->end == it->start && it->end <= ts) {
          it->end = ts;
          break;
        }
    }
  }

  // --- descriptors -------------------------------------------------------------------------------------
  void describe() {
    for (auto& [pid, name] : processes_) {
      Msg p;
      p.i(f::kPid, pid);
      if (!name.empty()) p.s(f::kProcessName, name);
      Msg d;
      d.u(f::kUuid, process_uuid(pid)).m(f::kProcess, p);
      descriptor(d);
    }
    for (auto& [key, t] : slice_tracks_) {
      t.uuid = ++next_uuid_;
      Msg th;
      th.i(f::kPid, t.pid).i(f::kTid, t.tid);
      if (!t.name.empty()) th.s(f::kThreadName, t.name);
      Msg d;
      d.u(f::kUuid, t.uuid).u(f::kParentUuid, process_uuid(t.pid)).m(f::kThread, th);
      descriptor(d);
    }
    for (auto& [key, t] : async_tracks_) child_track(t, false);
    for (auto& [key, t] : counter_tracks_) child_track(t, true);
  }
  template <class T>
  void child_track(T& t, bool counter) {
    t.uuid = ++next_uuid_;
    Msg d;
    d.u(f::kUuid, t.uuid).u(f::kParentUuid, process_uuid(t.pid)).s(f::kName, t.name);
    if (counter) d.m(f::kCounter, Msg{});
    descriptor(d);
  }
  uint64_t process_uuid(int64_t pid) {
    auto [it, fresh] = process_uuids_.try_emplace(pid, 0);
    if (fresh) it->second = ++next_uuid_;
    return it->second;
  }
  void descriptor(const Msg& d) {
    Msg p;
    p.u(f::kSequenceId, kSequence);
    if (first_) p.u(f::kSequenceFlags, kSeqIncrementalStateCleared);
    first_ = false;
    p.m(f::kTrackDescriptor, d);
    packet(p);
    ++stats_.descriptors;
  }

  // --- events ------------------------------------------------------------------------------------------
  void emit_slices(Track& t) {
    std::sort(t.slices.begin(), t.slices.end(), [](const Slice& a, const Slice& b) {
      return std::tie(a.start, b.end, a.order) < std::tie(b.start, a.end, b.order);  // outer first
    });
    std::vector<int64_t> open;  // ends of the open slices, innermost last
    for (const Slice& s : t.slices) {
      while (!open.empty() && open.back() <= s.start) {
        end(t, open.back());
        open.pop_back();
      }
      if (s.instant) {
        event(t, s, kInstant);
        continue;
      }
      int64_t e = s.end;
      if (!open.empty() && e > open.back()) {
        ++stats_.improperly_nested;
        e = open.back();
      }
      event(t, s, kSliceBegin);
      open.push_back(e);
    }
    for (; !open.empty(); open.pop_back()) end(t, open.back());
  }

  void event(const Track& t, const Slice& s, uint64_t type) {
    Msg ev;
    ev.u(f::kType, type).u(f::kTrackUuid, t.uuid);
    const std::string cat = text(s.event->if_contains("cat"));
    if (!cat.empty()) ev.u(f::kCategoryIids, intern(cats_, cat, f::kEventCategories));
    ev.u(f::kNameIid, intern(names_, text(s.event->if_contains("name")), f::kEventNames));
    if (const json::value* a = s.event->if_contains("args"); a && a->is_object())
      for (const auto& kv : a->as_object()) annotation(ev, kv.key(), kv.value());
    for (uint64_t id : s.flows_out) ev.fixed64(f::kFlowIds, id);
    for (uint64_t id : s.flows_in) ev.fixed64(f::kTerminatingFlowIds, id);
    ++(type == kInstant ? stats_.instants : stats_.slices);
    timed(s.start, ev);
  }
  void end(const Track& t, int64_t ts) {
    Msg ev;
    ev.u(f::kType, kSliceEnd).u(f::kTrackUuid, t.uuid);
    timed(ts, ev);
  }
  void emit_samples(const Track& t) {
    for (const auto& [ts, v] : t.samples) {
      Msg ev;
      ev.u(f::kType, kCounterEvent).u(f::kTrackUuid, t.uuid);
      if (v->is_double()) ev.d(f::kDoubleCounterValue, v->as_double());
      else ev.i(f::kCounterValue, v->to_number<int64_t>());
      ++stats_.counters;
      timed(ts, ev);
    }
  }

  void annotation(Msg& ev, std::string_view key, const json::value& v) {
    Msg a;
    a.u(f::kAnnName, intern(keys_, std::string(key), f::kAnnotationNames));
    if (v.is_int64()) a.i(f::kInt, v.as_int64());
    else if (v.is_uint64()) a.u(f::kUint, v.as_uint64());
    else if (v.is_double()) a.d(f::kDouble, v.as_double());
    else if (v.is_bool()) a.u(f::kBool, v.as_bool());
    else if (v.is_string() && opt_.intern_strings)
      a.u(f::kStringIid, intern(strings_, std::string(v.as_string()), f::kAnnotationStrings));
    else if (v.is_string()) a.s(f::kString, v.as_string());
    else if (v.is_array()) a.m(f::kNested, nested_array(v.as_array()));
    else return;  // null: nothing to say
    ev.m(f::kAnnotations, a);
  }
  static Msg nested_array(const json::array& arr) {
    Msg n;
    n.u(f::kNestedType, kNestedArray);
    for (const auto& x : arr) {
      Msg e;
      if (x.is_double()) e.d(f::kNestedDouble, x.as_double());
      else if (x.is_number()) e.i(f::kNestedInt, x.to_number<int64_t>());
      else e.s(f::kNestedString, text(&x));
      n.m(f::kArrayValues, e);
    }
    return n;
  }

  /// The interning id of `s` in one of the sequence's tables; a new entry goes into this packet's InternedData.
  uint64_t intern(std::unordered_map<std::string, uint64_t>& table, const std::string& s, uint32_t field) {
    auto [it, fresh] = table.try_emplace(s, table.size() + 1);
    if (fresh) interned_.m(field, Msg{}.u(f::kIid, it->second).s(f::kEntryName, s));
    return it->second;
  }

  void timed(int64_t ts, const Msg& ev) {
    Msg p;
    p.u(f::kTimestamp, static_cast<uint64_t>(std::max<int64_t>(0, ts))).u(f::kSequenceId, kSequence);
    p.u(f::kSequenceFlags, kSeqNeedsIncrementalState).m(f::kTrackEvent, ev);
    if (!interned_.empty()) p.m(f::kInterned, interned_);
    interned_ = Msg{};
    packet(p);
  }
  void packet(const Msg& p) {
    Msg wrap;
    wrap.m(f::kTracePacket, p);
    out_ += wrap.bytes();
    ++stats_.packets;
  }

  const ProtoOptions& opt_;
  ProtoStats& stats_;
  std::string out_;
  bool first_ = true;
  uint64_t next_uuid_ = 0;
  Msg interned_;
  std::unordered_map<std::string, uint64_t> names_, cats_, keys_, strings_;
  std::map<int64_t, std::string> processes_;
  std::map<int64_t, uint64_t> process_uuids_;
  std::map<ThreadKey, Track> slice_tracks_;
  std::map<ThreadKey, size_t> last_slice_;
  std::map<std::tuple<int64_t, std::string, std::string, std::string>, Track> async_tracks_;
  std::map<std::pair<int64_t, std::string>, Track> counter_tracks_;
};

}  // namespace

std::string encode_proto_trace(std::string_view text, const ProtoOptions& options, ProtoStats* stats) {
  ProtoStats local;
  const json::value root = json::parse(text);
  return Encoder(options, stats ? *stats : local).run(root.at("traceEvents").as_array());
}

}  // namespace inferscope::bench
