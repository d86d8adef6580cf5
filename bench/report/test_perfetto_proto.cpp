// The prototype protobuf encoder (proto_trace.hpp) read back with a minimal protobuf reader: the sizes in
// docs/benchmarks.md are only worth something if they measure a trace Perfetto's importer would accept, with
// every event of the JSON in it.
#include "dump/reader.hpp"
#include "proto_trace.hpp"
#include "export/perfetto.hpp"
#include "report/report.hpp"
#include "support/files.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace inferscope;
namespace json = boost::json;

namespace {

/// One field of a protobuf message: varints and fixed64 in `value`, length-delimited bytes in `bytes`.
struct Field {
  uint32_t number = 0, wire = 0;
  uint64_t value = 0;
  std::string_view bytes;
};

/// The fields of a message, in order; nullopt where the bytes are not a well-formed message.
std::optional<std::vector<Field>> fields(std::string_view b) {
  std::vector<Field> out;
  size_t at = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && at < b.size(); shift += 7) {
      const uint8_t c = static_cast<uint8_t>(b[at++]);
      v |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  };
  while (at < b.size()) {
    uint64_t key;
    if (!varint(key)) return std::nullopt;
    Field fl{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7), 0, {}};
    if (fl.wire == 0 && !varint(fl.value)) return std::nullopt;
    if (fl.wire == 1 || fl.wire == 5) {
      const size_t n = fl.wire == 1 ? 8 : 4;
      if (at + n > b.size()) return std::nullopt;
      std::memcpy(&fl.value, b.data() + at, n);
      at += n;
    }
    if (fl.wire == 2) {
      uint64_t n;
      if (!varint(n) || n > b.size() - at) return std::nullopt;
      fl.bytes = b.substr(at, n);
      at += n;
    }
    if (fl.wire == 3 || fl.wire == 4 || fl.wire > 5) return std::nullopt;
    out.push_back(fl);
  }
  return out;
}

std::vector<Field> must(std::string_view b) {
  auto f = fields(b);
  REQUIRE(f);
  return *f;
}

/// What a reader of the trace sees, and every rule it found broken.
struct Decoded {
  std::vector<std::string> problems;
  size_t begins = 0, ends = 0, instants = 0, counters = 0;
  std::multiset<std::string> slice_names;
  std::map<uint64_t, std::pair<int, int>> flows;  // id -> (starts, terminations)
};

class Reader {
 public:
  Decoded read(std::string_view trace) {
    for (const Field& p : must(trace)) {
      if (p.number != 1 || p.wire != 2) problem("a Trace field other than packet (1)");
      packet(must(p.bytes));
    }
    for (const auto& [uuid, open] : open_)
      if (open) problem("track " + std::to_string(uuid) + ": " + std::to_string(open) + " slices never end");
    return std::move(d_);
  }

 private:
  void problem(std::string s) { d_.problems.push_back(std::move(s)); }

  void packet(const std::vector<Field>& p) {
    uint64_t seq = 0, flags = 0, ts = 0;
    const Field *event = nullptr, *descriptor = nullptr;
    for (const Field& fl : p) {
      if (fl.number == 10) seq = fl.value;
      if (fl.number == 13) flags = fl.value;
      if (fl.number == 8) ts = fl.value;
      if (fl.number == 12) interned(must(fl.bytes));  // before the event: it may use what the packet defines
      if (fl.number == 11) event = &fl;
      if (fl.number == 60) descriptor = &fl;
    }
    if (seq != 1) problem("a packet without trusted_packet_sequence_id 1");
    if (first_ && !(flags & 1)) problem("the first packet does not clear the incremental state");
    first_ = false;
    if (descriptor) track(must(descriptor->bytes));
    if (event) {
      if (!(flags & 2)) problem("an event packet without SEQ_NEEDS_INCREMENTAL_STATE");
      track_event(must(event->bytes), ts);
    }
  }

  void interned(const std::vector<Field>& fs) {
    for (const Field& fl : fs) {
      uint64_t iid = 0;
      std::string name;
      for (const Field& e : must(fl.bytes)) {
        if (e.number == 1) iid = e.value;
        if (e.number == 2) name = std::string(e.bytes);
      }
      if (!iid) problem("an interned entry with iid 0");
      if (!tables_[fl.number].emplace(iid, name).second) problem("iid " + std::to_string(iid) + " interned twice");
    }
  }
  bool defined(uint32_t table, uint64_t iid) const {
    auto t = tables_.find(table);
    return t != tables_.end() && t->second.count(iid);
  }

  void track(const std::vector<Field>& fs) {
    uint64_t uuid = 0, parent = 0;
    bool counter = false;
    for (const Field& fl : fs) {
      if (fl.number == 1) uuid = fl.value;
      if (fl.number == 5) parent = fl.value;
      if (fl.number == 8) counter = true;
      if (fl.number == 4) {  // ThreadDescriptor: pid and tid
        std::set<uint32_t> have;
        for (const Field& t : must(fl.bytes)) have.insert(t.number);
        if (!have.count(1) || !have.count(2)) problem("a thread descriptor without pid and tid");
      }
    }
    if (!uuid || !tracks_.emplace(uuid, counter).second) problem("a track uuid 0 or described twice");
    if (parent && !tracks_.count(parent)) problem("a track whose parent is not described before it");
  }

  void track_event(const std::vector<Field>& fs, uint64_t ts) {
    uint64_t type = 0, uuid = 0, name = 0;
    bool value = false;
    for (const Field& fl : fs) {
      if (fl.number == 9) type = fl.value;
      if (fl.number == 11) uuid = fl.value;
      if (fl.number == 10) name = fl.value;
      if (fl.number == 3 && !defined(1, fl.value)) problem("a category iid not interned");
      if (fl.number == 30 || fl.number == 44) value = true;
      if (fl.number == 47) ++d_.flows[fl.value].first;
      if (fl.number == 48) ++d_.flows[fl.value].second;
      if (fl.number == 4)
        for (const Field& a : must(fl.bytes))
          if (a.number == 1 && !defined(3, a.value)) problem("an annotation name iid not interned");
    }
    const auto t = tracks_.find(uuid);
    if (t == tracks_.end()) return problem("an event on a track not described");
    if (t->second != (type == 4)) problem("a counter value on a slice track, or a slice on a counter track");
    if (ts < last_ts_[uuid] && type != 4) problem("a track going back in time");
    if (type == 4 && ts <= last_ts_[uuid] && seen_.count(uuid)) problem("a counter track not forward in time");
    last_ts_[uuid] = ts;
    seen_.insert(uuid);
    if (type == 1 || type == 3) {
      if (!defined(2, name)) return problem("a slice whose name iid is not interned");
      d_.slice_names.insert(tables_[2][name]);
    }
    if (type == 1) ++d_.begins, ++open_[uuid];
    if (type == 2 && open_[uuid]-- == 0) problem("an end without a begin on its track");
    if (type == 2) ++d_.ends;
    if (type == 3) ++d_.instants;
    if (type == 4 && !value) problem("a counter event without a value");
    if (type == 4) ++d_.counters;
  }

  Decoded d_;
  bool first_ = true;
  std::map<uint32_t, std::map<uint64_t, std::string>> tables_;  // InternedData field -> iid -> name
  std::map<uint64_t, bool> tracks_;                             // uuid -> counter track
  std::map<uint64_t, uint64_t> last_ts_;
  std::map<uint64_t, int> open_;
  std::set<uint64_t> seen_;
};

}  // namespace

TEST_CASE("the prototype protobuf trace of a real dump reads back with the JSON trace's events") {
  for (const char* name : {"real_io_wait", "cuda_sample_cupti_api"}) {
    CAPTURE(std::string(name));
    dump::DumpReader r((testsupport::fixtures() / (std::string(name) + ".iscope")).string());
    std::ostringstream out;
    exporter::write_perfetto(r, out);
    for (bool intern_strings : {false, true}) {
      bench::ProtoStats st;
      const std::string proto = bench::encode_proto_trace(out.str(), {intern_strings}, &st);
      Decoded d = Reader().read(proto);
      std::string first;
      for (size_t i = 0; i < d.problems.size() && i < 10; ++i) first += d.problems[i] + "\n";
      CHECK_MESSAGE(d.problems.empty(), d.problems.size() << " problems, the first:\n" << first);
      // Every slice, instant and counter sample of the JSON, and its flows, each started and ended once.
      std::multiset<std::string> json_names;
      size_t slices = 0, instants = 0, counters = 0, flows = 0;
      const json::value root = json::parse(out.str());
      for (const auto& e : root.at("traceEvents").as_array()) {
        const std::string ph(e.at("ph").as_string());
        if (ph == "X" || ph == "i") json_names.insert(std::string(e.at("name").as_string()));
        slices += ph == "X" || ph == "b";
        instants += ph == "i";
        counters += ph == "C";
        flows += ph == "s";
      }
      CHECK(d.begins == slices);
      CHECK(d.ends == slices);
      CHECK(d.instants == instants);
      CHECK(d.counters == counters);
      CHECK(d.flows.size() == flows);
      for (const auto& [id, n] : d.flows) CHECK(n == std::pair<int, int>{1, 1});
      for (const auto& n : json_names) CHECK(d.slice_names.count(n) >= 1);
      CHECK(proto.size() * 2 < out.str().size());
    }
  }
}

TEST_CASE("the protobuf reader of this test sees a broken trace") {
  const std::string good = bench::encode_proto_trace(
      R"({"traceEvents":[{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"main"}},)"
      R"({"ph":"X","name":"a","cat":"c","pid":1,"tid":2,"ts":1,"dur":2,"args":{"k":"v"}}]})");
  CHECK(Reader().read(good).problems.empty());
  // Without its first packet (the process track, which also clears the incremental state).
  const auto packets = must(good);
  const size_t first = packets.front().bytes.size() + 2;  // tag and a one-byte length
  CHECK_FALSE(Reader().read(std::string_view(good).substr(first)).problems.empty());
  CHECK_FALSE(fields(good.substr(0, good.size() - 1)));  // cut short
}
