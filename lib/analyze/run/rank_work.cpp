#include "analyze/run/rank_work.hpp"

#include "dump/visit.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace inferscope::analyze {
namespace {

const std::string kPython = "Python function", kRange = "range", kKernel = "kernel";

// The matched steps whose work every rank read.
std::vector<const std::vector<const RankStep*>*> with_work(const std::vector<std::vector<const RankStep*>>& matched) {
  std::vector<const std::vector<const RankStep*>*> out;
  for (const auto& row : matched)
    if (std::all_of(row.begin(), row.end(), [](const RankStep* s) { return s->work_read; })) out.push_back(&row);
  return out;
}

// Per (kind, name): the mean per matched step of rank r.
std::map<std::pair<std::string, std::string>, double> mean_work(const std::vector<const std::vector<const RankStep*>*>& rows,
                                                                size_t r) {
  std::map<std::pair<std::string, std::string>, double> mean;
  for (const auto* row : rows)
    for (const auto& [key, ns] : (*row)[r]->work_ns) mean[key] += ns / double(rows.size());
  return mean;
}

}  // namespace

StepWorkVisitor::StepWorkVisitor(const dump::DumpReader& r, const dump::ClockModel& clock, std::vector<RankStep>& steps)
    : r_(r), clock_(clock), steps_(steps), kept_(std::min(steps.size(), kMaxWorkSteps)) {
  for (size_t i = 0; i < kept_; ++i) steps_[i].work_read = true;
}

RankStep* StepWorkVisitor::step_at(int64_t t) {
  const auto end = steps_.begin() + ptrdiff_t(kept_);
  auto it = std::upper_bound(steps_.begin(), end, t, [](int64_t x, const RankStep& s) { return x < s.start_ns; });
  if (it == steps_.begin()) return nullptr;
  --it;
  return t < it->end_ns ? &*it : nullptr;
}

int64_t StepWorkVisitor::duration(uint64_t start, uint64_t end) const {
  return std::max<int64_t>(0, clock_.to_ns(end) - clock_.to_ns(start));
}

const std::string& StepWorkVisitor::name_of(uint32_t id) {
  auto it = names_.find(id);
  if (it == names_.end()) it = names_.emplace(id, r_.string_at(id)).first;
  return it->second;
}

// As the run's Python table names a function: "qualname (file:line)".
const std::string& StepWorkVisitor::code_name(uint32_t code) {
  auto it = code_names_.find(code);
  if (it == code_names_.end()) {
    auto c = r_.code_table().find(code);
    std::string n = c == r_.code_table().end()
                        ? "<code " + std::to_string(code) + ">"
                        : c->second.qualname +
                              (c->second.file.empty() ? "" : " (" + c->second.file + ":" + std::to_string(c->second.line) + ")");
    it = code_names_.emplace(code, std::move(n)).first;
  }
  return it->second;
}

void StepWorkVisitor::add(uint64_t start, const std::string& kind, const std::string& name, int64_t ns) {
  if (RankStep* s = step_at(clock_.to_ns(start)); s && ns > 0) s->work_ns[{kind, name}] += double(ns);
}

void StepWorkVisitor::on(const RangeRecord& rec, const dump::RecordContext& rc) {
  const int64_t d = duration(rec.start, rec.end);
  // NVTX ranges may overlap rather than nest: their whole time, as the run's range table counts them
  add(rec.start, kRange, name_of(rec.name), rc.kind() == RecordKind::kRange ? range_self_[rc.thread].self(rc.aux(), d) : d);
}

void StepWorkVisitor::on(const PyCallRecord& rec, const dump::RecordContext& rc) {
  add(rec.start, kPython, code_name(rec.code), py_self_[rc.thread].self(rc.aux(), duration(rec.start, rec.end)));
}

void StepWorkVisitor::on(const GpuKernelRecord& rec, const dump::RecordContext&) {
  add(rec.start, kKernel, name_of(rec.name), duration(rec.start, rec.end));
}

void add_step_work(const dump::DumpReader& r, std::vector<RankStep>& steps) {
  if (steps.empty()) return;
  const dump::ClockModel clock(r.calibration());
  StepWorkVisitor v(r, clock, steps);
  dump::visit_records(r, v);
}

Excess straggler_excess(const std::vector<std::vector<const RankStep*>>& matched, size_t straggler, Lateness late) {
  const auto rows = with_work(matched);
  if (rows.empty()) return {};
  const size_t ranks = rows.front()->size();
  std::map<std::pair<std::string, std::string>, double> others;  // the most any other rank spent, per step
  for (size_t r = 0; r < ranks; ++r)
    if (r != straggler)
      for (const auto& [key, ms] : mean_work(rows, r)) others[key] = std::max(others[key], ms);
  std::map<std::string, Excess> best;  // by kind
  for (const auto& [key, ns] : mean_work(rows, straggler)) {
    auto it = others.find(key);
    const double excess_ms = (ns - (it == others.end() ? 0.0 : it->second)) / 1e6;
    Excess& b = best[key.first];
    if (excess_ms > b.ms) b = {key.first, key.second, excess_ms};
  }
  // Late from GPU work: the host's extra time is then its wait for that work (a sync inside a function counts as
  // the function's self time), so the kernel is what it did instead.
  if (late == Lateness::kGpuWork && best[kKernel].ms > 0) return best[kKernel];
  Excess did = best[kPython];
  // a range's self time holds the Python calls inside it: the function, more precise, wins when near
  if (best[kRange].ms > did.ms * 1.25) did = best[kRange];
  if (best[kKernel].ms > did.ms) did = best[kKernel];
  return did;
}

}  // namespace inferscope::analyze
