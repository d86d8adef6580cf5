// A prototype encoder of Perfetto's protobuf trace format (Trace = repeated TracePacket; TrackDescriptor and
// TrackEvent, as in the public protos/perfetto/trace/... definitions), to measure what it would save against
// the trace-event JSON that lib/export/perfetto.cpp writes. It converts that JSON, so the two hold the same
// events by construction:
// - one packet sequence; the first packet clears the incremental state, every event packet needs it;
// - a TrackDescriptor per process, thread (ThreadDescriptor pid/tid/name), counter track (CounterDescriptor,
//   parent = its process) and async span;
// - "X" becomes a SLICE_BEGIN/SLICE_END pair ("i" an INSTANT), emitted track by track with each track's slices
//   ordered by start and then longest first, so that nesting holds where starts coincide (the trace processor
//   orders packets of equal timestamps as they come);
// - event names, categories and argument names interned (InternedData, emitted with their first use); with
//   `intern_strings`, string argument values too (DebugAnnotation.string_value_iid);
// - flows as flow_ids on the launch call's slice and terminating_flow_ids on the GPU activity's slice.
// It holds the whole trace in memory: a measurement, not a writer for dumps of any size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace inferscope::bench {

struct ProtoOptions {
  bool intern_strings = false;  ///< string argument values interned too (string_value_iid, InternedData field 29)
};

struct ProtoStats {
  size_t packets = 0, descriptors = 0, slices = 0, instants = 0, counters = 0, flows = 0;
  size_t improperly_nested = 0;  ///< slices that end after the slice they start in (ended with it)
};

/// The protobuf trace of a trace-event JSON document (a Trace message: its packets, field 1, one after another).
std::string encode_proto_trace(std::string_view json, const ProtoOptions& options = {}, ProtoStats* stats = nullptr);

}  // namespace inferscope::bench
