// The typed walk over a dump's records that every reader of records uses: the analyzer, the summary, the
// Perfetto writer, the SQLite export and the Python binding. The bytes are checked (size against the kind,
// ids against the file's tables), decoded and handed over as the record's struct here, in one place; a
// consumer says which records it reads by the handlers it declares.
//
//   struct KernelTime {
//     int64_t ticks = 0;
//     void on(const GpuKernelRecord& k, const dump::RecordContext&) { ticks += int64_t(k.end - k.start); }
//   };
//   KernelTime v;
//   dump::visit_records(reader, v);  // every EVENTS chunk in file order
//
// A visitor is any object with member functions `on(const XRecord&, const RecordContext&)` for the records it
// reads (a template `on(const auto&, const RecordContext&)` takes every kind); records with no matching handler
// are passed over. kRange and kNvtxRange share RangeRecord, kMark and kNvtxMark share MarkRecord: ctx.kind()
// tells them apart. Pads are skipped; kinds this reader does not know (written by a newer minor version) are
// skipped and counted in VisitTally::unknown. A malformed record throws DumpError naming the file and the
// record's offset; records before it have been handed over.
//
// Header-only, so the handlers inline into the loop: the analyzer's pass 1 runs at ~10 M records/s per core.
#pragma once

#include <inferscope/records.hpp>

#include "dump/reader.hpp"

#include <string>
#include <type_traits>
#include <vector>

namespace inferscope::dump {

/// What a handler gets besides the decoded record.
struct RecordContext {
  uint32_t thread = 0;          ///< dump thread id of the chunk (a collector's channel for GPU activities)
  RecordHeader header{};        ///< kind, aux (depth, API domain, copy kind, value type...), size with attributes
  const uint8_t* bytes = nullptr;  ///< the whole record, for DumpReader::attributes(); valid during the call only

  RecordKind kind() const { return header.kind; }
  uint8_t aux() const { return header.aux; }
  /// Attributes follow the fixed part (Range, Mark, AsyncRange): read them with DumpReader::attributes(bytes).
  bool has_attributes() const { return record_has_attrs(header.kind) && header.size > fixed_record_size(header.kind); }
};

/// What a visit saw. Counted as it goes, so a visit cut short by a DumpError still tells how far it got.
struct VisitTally {
  uint64_t records = 0;  ///< records of known kinds handed to the visitor (with or without a handler)
  uint64_t unknown = 0;  ///< records of kinds this reader does not know, skipped
};

namespace visit_detail {

template <class V, class T>
concept Handles = requires(V& v, const T& rec, const RecordContext& cx) { v.on(rec, cx); };

/// A visitor that handles nothing is almost always a handler whose signature does not match (`RangeRecord&`
/// without const, a missing context): refused at compile time rather than silently seeing no records.
template <class V>
inline constexpr bool kHandlesAny =
    Handles<V, RangeRecord> || Handles<V, MarkRecord> || Handles<V, ThreadNameRecord> ||
    Handles<V, AsyncRangeRecord> || Handles<V, ThreadEndRecord> || Handles<V, PyCallRecord> || Handles<V, PyCoroutineRecord> || Handles<V, PyElidedRecord> ||
    Handles<V, GpuKernelRecord> || Handles<V, GpuMemcpyRecord> || Handles<V, GpuMemsetRecord> ||
    Handles<V, GpuSyncRecord> || Handles<V, GpuMemoryRecord> || Handles<V, CudaApiRecord> ||
    Handles<V, GpuGraphLaunchRecord> || Handles<V, OverheadRecord> || Handles<V, ClockCheckRecord> ||
    Handles<V, CounterRecord>;

template <class T, class V>
inline void deliver(V& v, const RecordContext& cx) {
  if constexpr (Handles<V, T>) v.on(load<T>(cx.bytes), cx);
}

}  // namespace visit_detail

/// Decodes one record the cursor accepted (its size is at least its kind's) and calls the visitor's handler
/// for it, if any. No default: a kind added to RecordKind without a case here is a -Wswitch warning.
template <class V>
inline void dispatch_record(V& v, const RecordContext& cx) {
  using visit_detail::deliver;
  switch (cx.kind()) {
    case RecordKind::kPad: return;
    case RecordKind::kRange: case RecordKind::kNvtxRange: return deliver<RangeRecord>(v, cx);
    case RecordKind::kMark: case RecordKind::kNvtxMark: return deliver<MarkRecord>(v, cx);
    case RecordKind::kThreadName: return deliver<ThreadNameRecord>(v, cx);
    case RecordKind::kAsyncRange: return deliver<AsyncRangeRecord>(v, cx);
    case RecordKind::kThreadEnd: return deliver<ThreadEndRecord>(v, cx);
    case RecordKind::kPyCall: return deliver<PyCallRecord>(v, cx);
    case RecordKind::kPyCoroutine: return deliver<PyCoroutineRecord>(v, cx);
    case RecordKind::kPyElided: return deliver<PyElidedRecord>(v, cx);
    case RecordKind::kGpuKernel: return deliver<GpuKernelRecord>(v, cx);
    case RecordKind::kGpuMemcpy: return deliver<GpuMemcpyRecord>(v, cx);
    case RecordKind::kGpuMemset: return deliver<GpuMemsetRecord>(v, cx);
    case RecordKind::kGpuSync: return deliver<GpuSyncRecord>(v, cx);
    case RecordKind::kGpuMemory: return deliver<GpuMemoryRecord>(v, cx);
    case RecordKind::kCudaApi: return deliver<CudaApiRecord>(v, cx);
    case RecordKind::kGpuGraphLaunch: return deliver<GpuGraphLaunchRecord>(v, cx);
    case RecordKind::kCollectorOverhead: return deliver<OverheadRecord>(v, cx);
    case RecordKind::kClockCheck: return deliver<ClockCheckRecord>(v, cx);
    case RecordKind::kCounter: return deliver<CounterRecord>(v, cx);
  }
}

/// Visits the records of one EVENTS chunk in order. `tally`, when given, is added to as the visit goes.
template <class V>
inline void visit_records(const DumpReader& r, const EventsChunkRef& c, V&& v, VisitTally* tally = nullptr) {
  using Visitor = std::remove_reference_t<V>;
  static_assert(visit_detail::kHandlesAny<Visitor>,
                "a record visitor needs at least one on(const XRecord&, const dump::RecordContext&)");
  RecordCursor cursor(r, c, tally ? &tally->unknown : nullptr);
  RecordContext cx;
  cx.thread = c.thread_id;
  while ((cx.bytes = cursor.next(cx.header))) {
    if (tally) ++tally->records;
    dispatch_record(v, cx);
  }
}

/// Two visitors fed in one pass over the records (each record goes to every one that handles its kind), so two
/// stages reading the same dump do not decode it twice.
template <class A, class B>
struct BothVisitors {
  A& a;
  B& b;
  template <class T>
    requires visit_detail::Handles<A, T> || visit_detail::Handles<B, T>
  void on(const T& rec, const RecordContext& cx) {
    if constexpr (visit_detail::Handles<A, T>) a.on(rec, cx);
    if constexpr (visit_detail::Handles<B, T>) b.on(rec, cx);
  }
};

/// Visits every record of the dump, chunk by chunk in file order.
template <class V>
inline void visit_records(const DumpReader& r, V&& v, VisitTally* tally = nullptr) {
  for (const auto& c : r.event_chunks()) visit_records(r, c, v, tally);
}

/// What every reader of records does with a malformed one (the analysis, --summary, the Perfetto trace, the SQLite
/// export alike, so one damaged dump gets one answer): the rest of its chunk is skipped, the message naming the file
/// and the offset is added to `damage` (its one wording: "...; the rest of that chunk was skipped"), and every other
/// chunk is read. A malformed record used to end --summary with no output and the Perfetto trace with none.
inline std::string skipped_rest_of_chunk(const DumpError& e) {
  return std::string(e.what()) + "; the rest of that chunk was skipped";
}
template <class V>
inline void visit_records_past_damage(const DumpReader& r, V&& v, std::vector<std::string>& damage,
                                      VisitTally* tally = nullptr) {
  for (const auto& c : r.event_chunks()) {
    try {
      visit_records(r, c, v, tally);
    } catch (const DumpError& e) {
      damage.push_back(skipped_rest_of_chunk(e));
    }
  }
}

}  // namespace inferscope::dump
