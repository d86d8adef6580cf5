// The JSON report (docs/report-schema.md). Keys go out in the order this file inserts them (boost::json::object
// keeps insertion order), so the same analysis always gives the same bytes. Field names follow
// analyze::Analysis, except a finding's category, which the schema calls "bottleneck_type", and its impact,
// grouped as {"ms", "pct"}.
#include "analyze/breakdown_fields.hpp"
#include "analyze/table_fields.hpp"
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/json_text.hpp"
#include "report/report.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <cmath>
#include <type_traits>
#include <optional>
#include <string>
#include <string_view>

namespace inferscope::report {
namespace {

namespace json = boost::json;
using analyze::Analysis;

/// Strings from the trace may hold invalid UTF-8; the JSON text must not.
json::value str(const std::string& s) { return json::string(valid_utf8(s)); }
/// JSON has no NaN or infinity: such a number goes out as null.
json::value num(double v) { return std::isfinite(v) ? json::value(v) : json::value(nullptr); }
json::value num(uint64_t v) { return json::value(v); }

json::array steps_array(const std::vector<analyze::StepInstance>& steps) {
  json::array a;
  for (const auto& st : steps) {
    json::object x;
    x["index"] = num(uint64_t(st.index));
    x["start_ms"] = num(st.start_ms);
    x["duration_ms"] = num(st.duration_ms);
    a.push_back(std::move(x));
  }
  return a;
}

json::object steps_json(const analyze::StepStats& s) {
  json::object o;
  o["name"] = str(s.name);
  o["detected"] = s.detected;
  o["chosen_because"] = str(s.chosen_because);
  json::array candidates;
  for (const analyze::StepCandidate& c : s.candidates) {
    json::object k;
    k["name"] = str(c.name);
    k["kind"] = str(c.kind);
    k["count"] = num(c.count);
    k["total_ms"] = num(c.total_ms);
    k["launches"] = c.launches;
    candidates.push_back(std::move(k));
  }
  o["candidates"] = std::move(candidates);
  o["count"] = num(s.count);
  o["total"] = num(s.total);
  o["warmup"] = num(s.warmup);
  o["warmup_user"] = s.warmup_user;
  o["warmup_reason"] = str(s.warmup_reason);
  o["typical"] = num(s.typical);
  o["outlier_bound_ms"] = num(s.outlier_bound_ms);
  o["mean_ms"] = num(s.mean_ms);
  o["p50_ms"] = num(s.p50_ms);
  o["p90_ms"] = num(s.p90_ms);
  o["p99_ms"] = num(s.p99_ms);
  o["max_ms"] = num(s.max_ms);
  o["min_ms"] = num(s.min_ms);
  o["alike"] = s.alike;
  o["basis"] = str(s.basis);
  o["spread"] = str(s.spread);
  o["fast_mode_ms"] = num(s.fast_mode_ms);
  o["slow_mode_ms"] = num(s.slow_mode_ms);
  o["fast_mode_steps"] = num(s.fast_mode_steps);
  o["slow_mode_steps"] = num(s.slow_mode_steps);
  o["slowest"] = steps_array(s.slowest);
  o["outliers"] = steps_array(s.outliers);
  o["host_ahead"] = s.host_ahead;
  o["gpu_paced_ms"] = num(s.gpu_paced_ms);
  return o;
}

json::object waits_json(const analyze::Waits& w) {
  json::object o;
  o["measured"] = w.measured;
  o["thread_sample_ms"] = num(w.thread_sample_ms);
  o["blocked_ms"] = num(w.blocked_ms);
  json::array parties;
  for (const auto& p : w.parties) {
    json::object r;
    r["kind"] = str(p.kind);
    r["name"] = str(p.name);
    json::array members;
    for (const auto& m : p.members) members.push_back(str(m));
    r["members"] = std::move(members);
    r["python"] = p.python;
    r["ms_per_step"] = num(p.ms_per_step);
    r["share"] = num(p.share);
    r["busy_share"] = num(p.busy_share);
    r["cpu_ms_per_step"] = num(p.cpu_ms_per_step);
    r["wakeups"] = num(p.wakeups);
    r["off_cpu_in"] = str(p.off_cpu_in);
    r["site"] = str(p.site);
    json::array hot;
    for (const auto& [name, ms] : p.hot) hot.push_back(json::object{{"name", str(name)}, {"ms_per_step", num(ms)}});
    r["hot"] = std::move(hot);
    parties.push_back(std::move(r));
  }
  o["parties"] = std::move(parties);
  json::array sites;
  for (const auto& [name, ms] : w.sites) sites.push_back(json::object{{"name", str(name)}, {"ms_per_step", num(ms)}});
  o["sites"] = std::move(sites);
  json::array children;
  for (const auto& c : w.children)
    children.push_back(json::object{{"name", str(c.name)}, {"processes", num(c.processes)}, {"cpu_ms_per_step", num(c.cpu_ms_per_step)}});
  o["children"] = std::move(children);
  return o;
}

// The run across ranks (docs/report-schema.md, "run"): written only when two ranks or more were analysed together.
json::object run_json(const analyze::RunAnalysis& run, bool launcher);

json::object breakdown_json(const analyze::Breakdown& b) {
  json::object o;
  analyze::for_each_breakdown_field(b, [&o](const char* name, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) o[name] = value;
    else o[name] = num(value);
  });
  json::object by_cause;  // the findings' categories; they add up to step_ms (report-schema.md)
  for (const auto& r : cause_rows(b, true)) by_cause[r.key] = num(r.ms);
  o["by_cause"] = std::move(by_cause);
  return o;
}

template <class Row, class F>
json::array rows(const std::vector<Row>& v, F&& to_object) {
  json::array a;
  a.reserve(v.size());
  for (const auto& r : v) {
    json::object o;
    to_object(r, o);
    a.push_back(std::move(o));
  }
  return a;
}

/// A field of analyze/table_fields.hpp's lists as JSON: numbers through num (null for NaN), an OnlyWhenTrue left out
/// when false, an EstimatedMs null when not estimated, a missing --try measurement null, rows with fields of their
/// own (a table row's callers) as an array of objects. `names`: for rows that name kernels.
template <class V>
void put_field(json::object& o, const char* key, const V& v, const KernelNames* names = nullptr);

template <class Row>
json::array field_rows(const std::vector<Row>& v, const KernelNames* names) {
  return rows(v, [&](const Row& r, json::object& o) {
    analyze::for_each_field(r, *names, [&](const char* key, const auto& value) { put_field(o, key, value, names); });
  });
}

template <class V>
void put_field(json::object& o, const char* key, const V& v, const KernelNames* names) {
  if constexpr (std::is_same_v<V, std::string>) {
    o[key] = str(v);
  } else if constexpr (std::is_same_v<V, bool>) {
    o[key] = v;
  } else if constexpr (std::is_same_v<V, analyze::OnlyWhenTrue>) {
    if (v.value) o[key] = true;
  } else if constexpr (std::is_same_v<V, analyze::OnlyWhenFalse>) {
    if (!v.value) o[key] = false;
  } else if constexpr (std::is_same_v<V, analyze::EstimatedMs>) {
    o[key] = v.estimated ? num(v.ms) : json::value(nullptr);
  } else if constexpr (std::is_floating_point_v<V>) {
    o[key] = num(v);
  } else if constexpr (std::is_integral_v<V>) {
    o[key] = num(uint64_t(v));
  } else if constexpr (std::is_same_v<V, std::optional<analyze::TryMeasurement>>) {
    if (!v) {
      o[key] = nullptr;
      return;
    }
    json::object m;
    analyze::for_each_field(*v, [&m](const char* k, const auto& x) { put_field(m, k, x); });
    o[key] = std::move(m);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    json::array a;
    for (const auto& x : v) a.push_back(str(x));
    o[key] = std::move(a);
  } else {
    o[key] = field_rows(v, names);  // rows with fields of their own (CallerRow)
  }
}

json::object finding_json(const analyze::Finding& f, const std::string& cmdline) {
  json::object o;
  analyze::for_each_field(f, [&o](const analyze::FindingKey& key, const auto& value) {
    const std::string_view k = key.json;
    if (const size_t dot = k.find('.'); dot != std::string_view::npos) {  // inside a nested object, made on first use
      json::value& inner = o[k.substr(0, dot)];
      if (!inner.is_object()) inner = json::object();
      put_field(inner.as_object(), std::string(k.substr(dot + 1)).c_str(), value);
    } else {
      put_field(o, key.json, value);
    }
  });
  json::array evidence;
  for (const auto& e : f.evidence) evidence.push_back(str(e));
  o["evidence"] = std::move(evidence);
  json::object metrics;  // std::map: sorted by name
  for (const auto& [k, v] : f.metrics) metrics[valid_utf8(k)] = num(v);
  o["metrics"] = std::move(metrics);
  json::array examples;
  for (const auto& x : f.examples) {
    json::object e;
    analyze::for_each_field(x, [&e](const char* key, const auto& value) { put_field(e, key, value); });
    examples.push_back(std::move(e));
  }
  o["examples"] = std::move(examples);
  json::array suggestions;
  for (const auto& s : f.suggestions) {
    json::object e;
    analyze::for_each_field(s, cmdline, [&e](const char* key, const auto& value) { put_field(e, key, value); });
    suggestions.push_back(std::move(e));
  }
  o["suggestions"] = std::move(suggestions);
  return o;
}


// The generation loop (analysis.hpp's GenerationLoop); written only when one was detected.
json::object phase_json(const analyze::GenerationPhase& p) {
  json::object o;
  o["tokens"] = num(p.tokens);
  o["token_ms"] = num(p.token_ms);
  o["token_ms_p90"] = num(p.token_ms_p90);
  o["gpu_ms"] = num(p.gpu_ms);
  o["kernels"] = num(p.kernels);
  o["call_kernels"] = num(p.call_kernels);
  o["launch_ms"] = num(p.launch_ms);
  o["syncs"] = num(p.syncs);
  o["call_syncs"] = num(p.call_syncs);
  o["sync_ms"] = num(p.sync_ms);
  o["device_copies"] = num(p.d2d_copies);
  o["host_ms"] = num(p.host_ms);
  return o;
}
json::object generation_json(const analyze::GenerationLoop& g) {
  json::object o;
  o["token_function"] = str(g.token_function);
  o["marker"] = str(g.marker);
  o["steps"] = num(g.steps);
  o["tokens_per_step"] = num(g.tokens_per_step);
  o["ttft_ms"] = num(g.ttft_ms);
  o["ttft_ms_p90"] = num(g.ttft_ms_p90);
  o["tpot_ms"] = num(g.tpot_ms);
  o["tpot_ms_p90"] = num(g.tpot_ms_p90);
  o["tokens_per_s"] = num(g.tokens_per_s);
  o["prefill"] = phase_json(g.prefill);
  o["decode"] = phase_json(g.decode);
  json::array notes;
  for (const auto& n : g.notes) notes.push_back(str(n));
  o["notes"] = std::move(notes);
  return o;
}

// A batching engine's step time by batch size and its streamed requests' tokens (analysis.hpp's EngineBatches).
json::object engine_json(const analyze::EngineBatches& e) {
  json::object o;
  o["by_batch"] = rows(e.by_batch, [](const analyze::BatchSizeRow& b, json::object& x) {
    x["batch"] = str(b.batch);
    x["steps"] = num(b.steps);
    x["mean_batch"] = num(b.mean_batch);
    x["mean_ms"] = num(b.mean_ms);
    x["p50_ms"] = num(b.p50_ms);
  });
  o["fixed_ms"] = num(e.fixed_ms);
  o["per_request_ms"] = num(e.per_request_ms);
  o["fit_r2"] = num(e.fit_r2);
  o["streamed"] = e.streamed;
  o["streamed_requests"] = num(e.streamed_requests);
  o["steps_per_request"] = num(e.steps_per_request);
  o["ttft_p50_ms"] = num(e.ttft_p50_ms);
  o["ttft_p90_ms"] = num(e.ttft_p90_ms);
  o["tpot_p50_ms"] = num(e.tpot_p50_ms);
  o["tpot_p90_ms"] = num(e.tpot_p90_ms);
  return o;
}

// An asyncio service's requests (analysis.hpp's Requests); written only when they were detected.
json::object requests_json(const analyze::Requests& r) {
  json::object o;
  o["name"] = str(r.name);
  o["loop_thread"] = str(r.loop_thread);
  o["count"] = num(r.count);
  o["mean_ms"] = num(r.mean_ms);
  o["p50_ms"] = num(r.p50_ms);
  o["p90_ms"] = num(r.p90_ms);
  o["p99_ms"] = num(r.p99_ms);
  o["max_ms"] = num(r.max_ms);
  o["per_s"] = num(r.per_s);
  o["batched"] = r.batched;
  o["requests_per_step"] = num(r.requests_per_step);
  o["max_per_step"] = num(r.max_per_step);
  o["full_share"] = num(r.full_share);
  o["batch_gap_ms"] = num(r.batch_gap_ms);
  o["batch_ms"] = num(r.batch_ms);
  o["modeled_delay_ms"] = num(r.modeled_delay_ms);
  o["delay_modeled"] = r.delay_modeled;
  o["engine"] = engine_json(r.engine);
  json::object split;
  split["running_ms"] = num(r.split.running_ms);
  split["queued_ms"] = num(r.split.queued_ms);
  split["batch_wait_ms"] = num(r.split.batch_wait_ms);
  split["in_batch_ms"] = num(r.split.in_batch_ms);
  split["delayed_ms"] = num(r.split.delayed_ms);
  split["other_ms"] = num(r.split.other_ms);
  o["split"] = std::move(split);
  o["loop_busy_share"] = num(r.loop_busy_share);
  o["slow_callback_ms"] = num(r.slow_callback_ms);
  o["callbacks"] = rows(r.callbacks, [](const analyze::LoopCallbackRow& c, json::object& x) {
    x["name"] = str(c.name);
    x["runs"] = num(c.runs);
    x["slow"] = num(c.slow);
    x["total_ms"] = num(c.total_ms);
    x["max_ms"] = num(c.max_ms);
    x["share"] = num(c.share);
    x["delay_ms"] = num(c.delay_ms);
  });
  json::array notes;
  for (const auto& n : r.notes) notes.push_back(str(n));
  o["notes"] = std::move(notes);
  return o;
}

json::object tables_json(const Analysis& a) {
  json::object t;
  const KernelNames names = kernel_names(a);
  analyze::for_each_detail_rows(a, [&](const char* key, const auto& v) {
    t[key] = field_rows(v, &names);
    // The families' total, where the schema has always had it: right after their table.
    if (std::string_view(key) == "kernel_families") t["tensor_core_share"] = num(a.tensor_core_share);
  });
  return t;
}

json::object representative_json(const analyze::RepresentativeStep& rep) {
  json::object o;
  json::object step;
  step["index"] = num(uint64_t(rep.step.index));
  step["start_ms"] = num(rep.step.start_ms);
  step["duration_ms"] = num(rep.step.duration_ms);
  o["step"] = std::move(step);
  json::array lanes;
  for (const auto& l : rep.lanes) {
    json::object lane;
    lane["name"] = str(l.name);
    lane["gpu"] = l.gpu;
    lane["spans"] = rows(l.spans, [](const analyze::TimelineSpan& s, json::object& x) {
      x["start_ms"] = num(s.start_ms);
      x["end_ms"] = num(s.end_ms);
      x["label"] = str(s.label);
      x["category"] = str(s.category);
      x["depth"] = num(uint64_t(s.depth));
    });
    lanes.push_back(std::move(lane));
  }
  o["lanes"] = std::move(lanes);
  return o;
}

/// A double in its shortest form that reads back exactly, always with a fraction or exponent so that it stays
/// a floating-point number for every reader ("21.0", not "21"; Boost.JSON's own output would be "2.1E1").
void put_double(std::string& out, double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string_view t(buf, static_cast<size_t>(r.ptr - buf));
  out += t;
  if (t.find_first_of(".e") == std::string_view::npos) out += ".0";
}

/// Pretty-prints with two-space indentation, keys in insertion order; deterministic byte for byte.
void put(std::string& out, const json::value& v, int indent) {
  const auto newline = [&](int n) {
    out += '\n';
    out.append(static_cast<size_t>(n) * 2, ' ');
  };
  switch (v.kind()) {
    case json::kind::object: {
      const auto& o = v.get_object();
      if (o.empty()) return void(out += "{}");
      out += '{';
      bool first = true;
      for (const auto& kv : o) {
        if (!first) out += ',';
        first = false;
        newline(indent + 1);
        out += json_quote(kv.key());
        out += ": ";
        put(out, kv.value(), indent + 1);
      }
      newline(indent);
      out += '}';
      break;
    }
    case json::kind::array: {
      const auto& a = v.get_array();
      if (a.empty()) return void(out += "[]");
      out += '[';
      bool first = true;
      for (const auto& e : a) {
        if (!first) out += ',';
        first = false;
        newline(indent + 1);
        put(out, e, indent + 1);
      }
      newline(indent);
      out += ']';
      break;
    }
    case json::kind::string: out += json_quote(v.get_string()); break;
    case json::kind::double_: put_double(out, v.get_double()); break;
    default: out += json::serialize(v); break;  // integers, booleans, null
  }
}

}  // namespace

std::string pretty_json(const json::value& v) {
  std::string text;
  put(text, v, 0);
  text += '\n';
  return text;
}

json::object sampling_json(const analyze::Sampling& s) {
  json::object o;
  o["mode"] = str(s.mode);
  o["step_name"] = str(s.step_name);
  o["by_steps"] = s.by_steps;
  o["steps_seen"] = num(s.steps_seen);
  o["steps_in_windows"] = num(s.steps_in_windows);
  o["step_coverage_pct"] = num(s.step_coverage_pct);
  o["run_ms"] = num(s.run_ms);
  o["window_ms"] = num(s.window_ms);
  o["time_coverage_pct"] = num(s.time_coverage_pct);
  o["windows_opened"] = num(uint64_t(s.windows_opened));
  o["windows_kept"] = num(uint64_t(s.windows_kept));
  o["windows_dropped"] = num(uint64_t(s.windows_dropped));
  o["records_dropped"] = num(s.records_dropped);
  o["records_outside"] = num(s.records_outside);
  o["slow_steps_seen"] = num(uint64_t(s.slow_steps_seen));
  json::array windows;
  for (const auto& w : s.windows) {
    json::object x;
    x["index"] = num(uint64_t(w.index));
    x["reason"] = str(w.reason);
    x["full"] = w.full;
    x["open"] = w.open;
    x["pinned"] = w.pinned;
    x["start_ms"] = num(w.start_ms);
    x["end_ms"] = num(w.end_ms);
    x["first_step"] = num(w.first_step);
    x["steps"] = num(uint64_t(w.steps));
    x["slow_steps"] = num(uint64_t(w.slow_steps));
    x["steps_analyzed"] = num(uint64_t(w.steps_analyzed));
    x["records"] = num(w.records);
    windows.push_back(std::move(x));
  }
  o["windows"] = std::move(windows);
  json::array slow;
  for (const auto& e : s.slow_steps) {
    json::object x;
    x["step"] = num(e.step);
    x["start_ms"] = num(e.start_ms);
    x["duration_ms"] = num(e.duration_ms);
    x["bound_ms"] = num(e.bound_ms);
    x["detail"] = str(e.detail);
    x["window"] = num(uint64_t(e.window));
    x["grew"] = str(e.grew);
    x["grew_ms"] = num(e.grew_ms);
    slow.push_back(std::move(x));
  }
  o["slow_steps"] = std::move(slow);
  return o;
}

void write_json(const Analysis& a, std::ostream& out) {
  json::object root;
  root["schema_version"] = kJsonSchemaVersion;
  root["source"] = str(a.source);
  root["source_format"] = str(a.source_format);
  json::object process;  // std::map: sorted by key
  for (const auto& [k, v] : a.process) process[valid_utf8(k)] = str(v);
  root["process"] = std::move(process);
  root["events"] = num(a.events);
  root["trace_ms"] = num(a.trace_ms);
  root["end_to_end_ms"] = num(a.end_to_end_ms);
  root["steps"] = steps_json(a.steps);
  if (a.sampling.sampled) root["sampling"] = sampling_json(a.sampling);  // a sampled run only
  root["breakdown"] = breakdown_json(a.breakdown);
  root["waits"] = waits_json(a.waits);
  if (a.generation.detected) root["generation"] = generation_json(a.generation);  // a generation loop only
  if (a.requests.detected) root["requests"] = requests_json(a.requests);            // an asyncio service only
  {
    json::object program;  // the program facts that hold, each with why (suggestions' "needs" name them)
    for (const auto& [fact, why] : a.program.holds) program[fact] = str(why);
    root["program"] = std::move(program);
  }
  json::array findings;
  for (const auto& f : a.findings) findings.push_back(finding_json(f, cmdline_of(a)));
  root["findings"] = std::move(findings);
  root["tables"] = tables_json(a);
  json::object al;
  al["kernels_checked"] = num(a.alignment.kernels_checked);
  al["max_violation_us"] = num(a.alignment.max_violation_us);
  al["violations_over_1us"] = num(a.alignment.violations_over_1us);
  al["violation_pct"] = num(a.alignment.violation_pct);
  al["ok"] = a.alignment.ok;
  al["note"] = str(a.alignment.note);
  root["alignment"] = std::move(al);
  json::object drops;
  for (const auto& [reason, n] : a.drops) drops[valid_utf8(reason)] = num(n);
  root["drops"] = std::move(drops);
  if (!a.rule_file.empty()) root["rule_file"] = str(a.rule_file);  // docs/rules.md
  json::array warnings;
  for (const auto& w : a.warnings) warnings.push_back(str(w));
  root["warnings"] = std::move(warnings);
  root["partial"] = a.partial;
  root["gpu_work_recorded"] = a.gpu_work_recorded;
  json::array children;
  for (const auto& c : a.children) {
    json::object x;
    x["path"] = str(c.path);
    x["pid"] = num(c.pid);
    x["cmdline"] = str(c.cmdline);
    x["complete"] = c.complete;
    x["events"] = num(c.events);
    x["steps"] = num(c.steps);
    x["step_ms"] = num(c.step_ms);
    x["primary"] = str(c.primary);
    x["error"] = str(c.error);
    children.push_back(std::move(x));
  }
  root["children"] = std::move(children);
  if (!a.run.ranks.empty()) root["run"] = run_json(a.run, a.launcher);
  root["representative"] = representative_json(a.representative);
  std::string text;
  put(text, root, 0);
  text += '\n';
  out << text;
}

namespace {

json::object run_json(const analyze::RunAnalysis& run, bool launcher) {
  json::object o;
  o["launcher"] = launcher;
  o["steps_matched"] = num(run.steps_matched);
  o["hosts"] = num(run.hosts);
  o["step_ms"] = num(run.step_ms);
  o["imbalance_pct"] = num(run.imbalance_pct);
  o["straggler"] = num(double(run.straggler));
  o["straggler_did"] = str(run.straggler_did);
  json::array ranks;
  for (const auto& r : run.ranks)
    ranks.push_back(json::object{{"rank", num(double(r.rank))}, {"pid", num(r.pid)}, {"path", str(r.path)},
                                 {"hostname", str(r.hostname)}, {"devices", str(r.devices)}, {"primary", str(r.primary)},
                                 {"step_ms", num(r.step_ms)}, {"compute_ms", num(r.compute_ms)}, {"comm_ms", num(r.comm_ms)},
                                 {"overlap_ms", num(r.overlap_ms)}, {"wait_ms", num(r.wait_ms)},
                                 {"transfer_ms", num(r.transfer_ms)}, {"late_ms", num(r.late_ms)}});
  o["ranks"] = std::move(ranks);
  json::array collectives;
  for (const auto& c : run.collectives)
    collectives.push_back(json::object{{"op", str(c.op)}, {"per_step", num(c.per_step)}, {"transfer_ms", num(c.transfer_ms)},
                                       {"wait_ms", num(c.wait_ms)}, {"last_rank", num(double(c.last_rank))},
                                       {"last_share", num(c.last_share)}, {"waited_share", num(c.waited_share)}});
  o["collectives"] = std::move(collectives);
  if (!run.host_clocks.empty()) {  // ranks on several hosts only: one host's reports stay as they were
    json::array clocks;
    for (const auto& c : run.host_clocks)
      clocks.push_back(json::object{{"hostname", str(c.hostname)}, {"ranks", str(c.ranks)}, {"reference", c.reference},
                                    {"estimated", c.estimated}, {"clock_offset_ms", num(c.offset_ms)},
                                    {"clock_precision_us", num(c.precision_us)},
                                    {"collectives_used", num(c.collectives_used)}});
    o["host_clocks"] = std::move(clocks);
  }
  json::array findings;
  for (const auto& f : run.findings) findings.push_back(finding_json(f, ""));
  o["findings"] = std::move(findings);
  json::array warnings;
  for (const auto& w : run.warnings) warnings.push_back(str(w));
  o["warnings"] = std::move(warnings);
  return o;
}

}  // namespace

}  // namespace inferscope::report
