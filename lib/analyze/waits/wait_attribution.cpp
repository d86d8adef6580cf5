// Stage "wait attribution" (waits.hpp): who each piece of the step thread's wait went to. docs/analysis.md,
// "Whom the step waits on", states the rules and their reasons; in short, for a piece of length L in which the
// step thread was blocked for b:
//
//  * where it sat: its innermost Python frame and range, and the wait-point call (Queue.get, Condition.wait, a
//    DataLoader's __next__, ...) around it, if any;
//  * outside any wait point, blocked in a sleep or in I/O (thread.blocked_in): its own sleep or I/O;
//  * otherwise every other thread and child process is a candidate with its activity a in [0, 1]: its CPU time in
//    the piece over L. A thread waiting in a wait point itself is idle. The thread whose wake call (Queue.put,
//    Event.set, ...) ended the step thread's wait counts as active for all of the piece it did not spend
//    waiting itself (a producer reading from disk is working for the step without a CPU). A thread inside a
//    lock-like wait point (a logging handler) during the piece is holding it or queueing for it: active.
//    Outside wait points, a Python thread on a CPU holds the GIL the step thread waits for;
//  * b goes to the candidates in proportion to a: all of it when the sum of a is at least kActiveForAll (whom the
//    step waits on is busy while it waits), else at most L times the sum of a; the rest stays unknown.
//
// Parties group a pool's threads (pool_name) and the child processes of one name.
#include "analyze/waits/waits.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

namespace inferscope::analyze::detail {

std::string pool_name(const std::string& n) {
  size_t end = n.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(n[end - 1]))) --end;
  if (end == n.size() || end == 0) return n;
  const char sep = n[end - 1];
  if (sep != '_' && sep != '-' && sep != '.' && sep != ' ' && sep != '#' && sep != ':') return n;
  return n.substr(0, end) + "*";
}

namespace {

using Kind = WaitParty::Kind;

// One thread's wait calls by start, with the latest end so far at each, so that the calls overlapping an
// interval are found by walking back from its end only while an earlier call could still reach into it.
class ThreadWaits {
 public:
  void add(const WaitCall& c) { calls_.push_back(&c); }
  void finish() {
    std::sort(calls_.begin(), calls_.end(), [](const WaitCall* x, const WaitCall* y) { return x->start < y->start; });
    reach_.resize(calls_.size());
    int64_t r = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < calls_.size(); ++i) reach_[i] = r = std::max(r, calls_[i]->end);
  }
  // How much of [a, b) the calls cover (of `kind` only when `same_kind`); they nest or follow each other.
  double covered(int64_t a, int64_t b, bool same_kind, WaitKind kind) const {
    auto it = std::lower_bound(calls_.begin(), calls_.end(), b, [](const WaitCall* c, int64_t x) { return c->start < x; });
    std::vector<std::pair<int64_t, int64_t>> v;
    for (size_t j = size_t(it - calls_.begin()); j-- > 0 && reach_[j] > a;) {
      const WaitCall* c = calls_[j];
      if (c->end <= a || (same_kind && c->point->kind != kind)) continue;
      v.emplace_back(std::max(a, c->start), std::min(b, c->end));
    }
    std::sort(v.begin(), v.end());
    double sum = 0;
    int64_t at = a;
    for (auto& [x, y] : v) {
      x = std::max(x, at);
      if (y > x) {
        sum += double(y - x);
        at = y;
      }
    }
    return sum;
  }

 private:
  std::vector<const WaitCall*> calls_;
  std::vector<int64_t> reach_;
};

// The step thread's wait calls around an instant, for instants in time order (the pieces'): a sweep over the calls
// by start keeping those still open. The innermost is the shortest open one, the outermost the longest (a thread's
// calls nest or follow each other).
struct Around {
  const WaitCall* inner = nullptr;
  const WaitCall* outer = nullptr;
};
class WaitCallSweep {
 public:
  explicit WaitCallSweep(const std::vector<WaitCall>& calls) : calls_(calls) {}
  Around at(int64_t t) {
    while (next_ < calls_.size() && calls_[next_].start <= t) open_.push_back(&calls_[next_++]);
    std::erase_if(open_, [&](const WaitCall* c) { return c->end <= t; });
    Around r;
    for (const WaitCall* c : open_) {
      if (!r.inner || c->end - c->start < r.inner->end - r.inner->start) r.inner = c;
      if (!r.outer || c->end - c->start > r.outer->end - r.outer->start) r.outer = c;
    }
    return r;
  }

 private:
  const std::vector<WaitCall>& calls_;
  size_t next_ = 0;
  std::vector<const WaitCall*> open_;
};

// The wake call by another thread that ended the wait `c`: the latest to end inside it (or within a millisecond
// after it: the waiter returns once it has the GIL back, the waker may still be on its way out).
const WaitCall* waker_of(const std::vector<WaitCall>& wakes, const WaitCall& c) {
  constexpr int64_t kSlackNs = 1'000'000;
  auto it = std::upper_bound(wakes.begin(), wakes.end(), c.end + kSlackNs,
                             [](int64_t x, const WaitCall& w) { return x < w.end; });
  while (it != wakes.begin()) {
    --it;
    if (it->end < c.start) return nullptr;
    if (it->thread != c.thread) return &*it;
  }
  return nullptr;
}

// The profiler's own threads (iscope-writer, iscope-system, ...): they take CPU time, which the run-queue and
// overhead figures count, but no program code waits on them.
bool is_profiler_thread(const std::string& name) { return name.rfind("iscope-", 0) == 0; }

// The candidates' summed activity (CPU share of the piece) from which the whole of the step thread's blocked time
// in the piece is theirs (attribute_waits gives the reason for the value).
constexpr double kActiveForAll = 0.25;
// Telling a lock's holder from the GIL's: while a Python thread sits in a long CUDA call (a synchronization or a
// blocking copy: torch makes those without the GIL), a step thread that only wanted the GIL takes it and runs. If
// the step thread stays blocked through most of another thread's long CUDA calls (kLockBlockedShare), outside
// wait calls of its own, it waits for something that thread holds across them: a lock (two inference threads
// sharing a model under a threading.Lock). Long: at least kLongCudaCallNs; launches and async copies return in
// microseconds, too short for the step thread's samples (1 ms) to say anything about.
constexpr double kLockBlockedShare = 0.5;
constexpr int64_t kLockEvidenceNs = 2'000'000;  // at least this much long-call time in the typical steps


struct Candidate {
  Kind kind;
  std::string key;  // party key
  const Activity* who;
  double a;
};

struct PartyAcc {
  WaitParty party;
  std::set<uint32_t> members;
  std::map<std::string, double> sites;
  std::map<int64_t, double> off_cpu;  // BlockedIn -> the members' off-CPU time in the pieces
  std::map<uint32_t, std::string> names;  // member -> its own name
  size_t last_piece = SIZE_MAX;  // the pieces' wall time counts once per piece, whatever the members
};

// What the step thread's reads found it blocked in during a piece, when they found it in a futex with the
// timeout read (thread.blocked_in, dumps that tell the two apart): an untimed futex is a lock (`with lock:`, a
// blocking acquire), never the GIL, which CPython waits for a switch interval at a time (a timed wait).
enum class FutexSeen : uint8_t { kNotSeen, kTimed, kUntimed };
FutexSeen futex_seen(const LevelSeries& s, int64_t a, int64_t b) {
  const double timed = s.time_at_value(a, b, int64_t(BlockedIn::kLockTimed));
  const double untimed = s.time_at_value(a, b, int64_t(BlockedIn::kLockUntimed));
  if (timed <= 0 && untimed <= 0) return FutexSeen::kNotSeen;
  return untimed > timed ? FutexSeen::kUntimed : FutexSeen::kTimed;
}

std::string party_key(Kind k, const std::string& name) { return std::to_string(int(k)) + ":" + name; }

// The Python threads seen holding a lock rather than the GIL (kLockBlockedShare above): over the typical steps,
// the step thread's blocked share through their long CUDA calls, outside its own wait calls.
std::set<uint32_t> threads_holding_locks(const WaitFrames& f, const ActivitySet& act, const std::vector<WaitStep>& steps) {
  std::set<uint32_t> out;
  const Activity& st = act.step;
  if (st.run.points.size() < 2 || steps.empty()) return out;
  for (const Activity& o : act.others) {
    if (!o.python || o.kind != Activity::Kind::kThread) continue;
    auto calls = act.cuda_calls.find(o.id);
    if (calls == act.cuda_calls.end()) continue;
    double total = 0, blocked = 0;
    WaitCallSweep sweep(f.step_waits);
    size_t s = 0;
    for (const auto& [a, b] : calls->second) {
      if (b - a < kLongCudaCallNs) continue;
      while (s < steps.size() && steps[s].end <= a) ++s;
      if (s == steps.size()) break;
      if (a < steps[s].start || b > steps[s].end) continue;  // inside a typical step only
      if (sweep.at(a + (b - a) / 2).inner) continue;        // the step thread was in a hand-off of its own
      const double len = double(b - a);
      const double ran = st.run.delta(a, b) / len;
      const double queued = st.runq.points.size() >= 2 ? st.runq.delta(a, b) / len : 0.0;
      total += len;
      blocked += len * std::clamp(1.0 - ran - queued, 0.0, 1.0);
    }
    if (total >= double(kLockEvidenceNs) && blocked >= kLockBlockedShare * total) out.insert(o.id);
  }
  return out;
}

// Every other thread and child process active while the step thread was blocked in `p`, with its activity a in
// [0, 1] and the kind of party it is (docs/analysis.md gives the rules), and the sum of a.
struct Candidates {
  std::vector<Candidate> list;
  double total = 0;
};
Candidates candidates_in(const WaitPiece& p, const ActivitySet& act,
                         const std::unordered_map<uint32_t, ThreadWaits>& waits_of, const Around& around,
                         const WaitCall* waker, bool io, FutexSeen futex, const std::set<uint32_t>& lock_holders) {
  auto covered = [&](uint32_t thread, int64_t a, int64_t b, bool same_kind, WaitKind kind) {
    auto it = waits_of.find(thread);
    return it == waits_of.end() ? 0.0 : it->second.covered(a, b, same_kind, kind);
  };
  const bool lockish = around.inner && (around.inner->point->kind == WaitKind::kLogging ||
                                        around.inner->point->kind == WaitKind::kLock);
  // Activity is measured over the step thread's sample interval around the piece: its blocked time is known at
  // that resolution only (a GIL wait and the holder's burst that caused it lie somewhere in the same
  // millisecond, not necessarily in this piece of it), and so is every other thread's CPU time.
  const int64_t s0 = p.sample_end > p.sample_start ? p.sample_start : p.start;
  const int64_t s1 = p.sample_end > p.sample_start ? p.sample_end : p.end;
  const double S = double(s1 - s0);
  Candidates out;
  for (const Activity& o : act.others) {
    if (is_profiler_thread(o.name)) continue;  // the step never waits on the profiler's own threads
    const double run = std::clamp(o.run_in(s0, s1) / S, 0.0, 1.0);
    const uint32_t tid = o.kind == Activity::Kind::kThread ? o.id : UINT32_MAX;
    const double waiting = tid != UINT32_MAX ? std::min(1.0, covered(tid, s0, s1, false, WaitKind::kQueue) / S) : 0;
    // Its CPU time lies outside its own wait calls (a thread in Queue.get or Event.wait is off a CPU): active
    // for its CPU share, at most the share it spent outside them.
    double a = std::min(run, 1.0 - waiting);
    if (waker && waker->thread == tid) a = std::max(a, 1.0 - waiting);
    if (lockish && tid != UINT32_MAX)
      a = std::max(a, covered(tid, s0, s1, true, around.inner->point->kind) / S);
    if (a < 0.02) continue;
    // Outside wait points a Python thread on a CPU holds the GIL the step thread waits for, unless the step
    // thread sat in an untimed futex (a lock: futex_seen), or that thread is seen holding something else
    // (threads_holding_locks, for dumps that do not tell the futex waits apart), or the step thread sat in I/O.
    const bool outside = !around.inner && !io && o.python && act.step.python;
    const bool lock = futex == FutexSeen::kUntimed || (futex == FutexSeen::kNotSeen && lock_holders.count(o.id));
    const Kind kind = outside ? (lock ? Kind::kLock : Kind::kGil) : Kind::kThreads;
    out.list.push_back({kind, party_key(kind, pool_name(o.name.empty() ? "thread " + std::to_string(o.os_id) : o.name)), &o, a});
    out.total += a;
  }
  for (const Activity& c : act.children) {
    const double a = std::clamp(c.run_in(s0, s1) / S, 0.0, 1.0);
    if (a < 0.02) continue;
    out.list.push_back({Kind::kProcesses, party_key(Kind::kProcesses, c.name.empty() ? "process" : c.name), &c, a});
    out.total += a;
  }
  return out;
}

// What a party's members ran during the waits, by self time, the five hottest: their recorded Python functions
// and ranges (a wait point is where a member idled, not its work), a child process's from its own dump. None for
// the step thread's own sleep or I/O, or nobody.
std::vector<std::pair<std::string, double>> hot_frames_of(const WaitParty& party, const WaitFrames& f,
                                                          const std::unordered_map<uint32_t, const ChildFrames*>& child_of,
                                                          const WaitNaming& nm) {
  std::vector<std::pair<std::string, double>> out;
  if (party.kind == Kind::kOwnSleep || party.kind == Kind::kOwnIo || party.kind == Kind::kUnknown) return out;
  std::map<std::string, double> hot;
  for (uint32_t m : party.members) {
    if (party.kind == Kind::kProcesses) {
      if (auto it = child_of.find(m); it != child_of.end())
        for (auto& [name, ns] : it->second->hot_ns) hot[name] += ns;
    } else if (auto it = f.others.find(m); it != f.others.end()) {
      for (auto& [code, ns] : it->second.py_ns)
        if (!nm.wait_point(code)) hot[nm.code_name(code)] += ns;
      for (auto& [name, ns] : it->second.range_ns) hot["range " + nm.range_name(name)] += ns;
    }
  }
  for (auto& [name, ns] : hot) out.emplace_back(name, ns);
  std::sort(out.begin(), out.end(), [](auto& x, auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  if (out.size() > 5) out.resize(5);
  return out;
}

}  // namespace

WaitAttribution attribute_waits(const WaitWindows& w, const WaitFrames& f, const ActivitySet& act,
                                const std::vector<ChildFrames>& child_frames, const WaitNaming& nm) {
  WaitAttribution out;
  out.measured = w.measured;
  out.thread_sample_ms = act.thread_sample_ms;
  out.round_ms = act.round_ms;
  std::map<std::string, PartyAcc> parties;
  // Which wait call a piece sits in, and who ended it (wakeups are counted once per call, not per piece).
  std::set<const WaitCall*> counted_wakes;
  auto site_name = [&](size_t k, const Around& around) {
    if (around.outer && around.outer != around.inner) return nm.code_name(around.outer->code);
    if (around.inner) return nm.code_name(around.inner->code);
    if (k < f.piece_py.size() && f.piece_py[k]) return nm.code_name(f.piece_py[k]);
    if (k < f.piece_range.size() && f.piece_range[k]) return "range " + nm.range_name(f.piece_range[k]);
    return std::string("(no frame recorded)");
  };
  size_t piece = 0;
  auto add = [&](Kind kind, const std::string& name, const Activity* who, double blocked, double cpu, double span,
                 const std::string& site, const WaitCall* in_call) {
    PartyAcc& p = parties[party_key(kind, name)];
    if (p.last_piece == piece) span = 0;
    p.last_piece = piece;
    p.party.kind = kind;
    p.party.name = name;
    if (who) {
      p.members.insert(who->id);
      p.names[who->id] = who->name;
      p.party.python |= who->python;
    }
    p.party.blocked_ns += blocked;
    p.party.cpu_ns += cpu;
    p.party.span_ns += span;
    p.sites[site] += blocked;
    if (in_call) {
      p.party.site_is_wait_point = true;
      p.party.site_kind = in_call->point->kind;
    }
  };

  const std::set<uint32_t> lock_holders = threads_holding_locks(f, act, nm.steps);
  std::unordered_map<uint32_t, ThreadWaits> waits_of;  // other threads' own wait calls
  for (const WaitCall& c : f.other_waits) waits_of[c.thread].add(c);
  for (auto& [t, tw] : waits_of) tw.finish();
  WaitCallSweep sweep(f.step_waits);
  for (size_t k = 0; k < w.pieces.size(); ++k) {
    piece = k;
    const WaitPiece& p = w.pieces[k];
    const double L = double(p.end - p.start), b = p.blocked_ns();
    if (L <= 0 || b <= 0) continue;
    const int64_t mid = p.start + (p.end - p.start) / 2;
    const Around around = sweep.at(mid);
    const std::string site = site_name(k, around);
    const BlockedIn bi = BlockedIn(act.step.blocked_in.at(mid, int64_t(BlockedIn::kUnknown)));
    const FutexSeen futex = futex_seen(act.step.blocked_in, p.start, p.end);
    auto& step_total = out.per_step[p.step];
    (p.dispatch_gap ? step_total.gap_blocked : step_total.blocked) += b;
    out.blocked_ns += b;
    // Its own sleep: outside any wait point, in a sleep (nobody else is waited for by sleeping).
    if (!around.inner && bi == BlockedIn::kSleep) {
      add(Kind::kOwnSleep, act.step.name, &act.step, b, 0, L, site, nullptr);
      continue;
    }
    // A read, write or poll outside wait points is its own I/O, unless someone was busy meanwhile: the other end of
    // the pipe or socket (a decoder child process writing the frame the step reads) is whom it waits on.
    const bool io = !around.inner && (bi == BlockedIn::kRead || bi == BlockedIn::kWrite || bi == BlockedIn::kPoll);
    const WaitCall* waker = around.inner ? waker_of(f.wakes, *around.inner) : nullptr;
    const auto [cands, A] = candidates_in(p, act, waits_of, around, waker, io, futex, lock_holders);
    // Whom the step waits on is busy while it waits (a GIL holder runs while the step thread queues for the GIL;
    // workers compute while the step waits for their batch), so the two coincide, never independent: candidates
    // active for at least kActiveForAll of the piece get all of b (a holder keeps the GIL or the lock through its
    // own short preemptions and hand-backs: on the H100 recording of a GIL-bound producer thread it ran 41-68 % of
    // pieces in which the step thread waited in a futex throughout); below that, activity that small is as likely
    // coincidence, and they get at most their active time, min(b, A L).
    if (io && A < kActiveForAll) {
      add(Kind::kOwnIo, act.step.name, &act.step, b, 0, L, site, nullptr);
      continue;
    }
    const double given_total = A >= kActiveForAll ? b : std::min(b, A * L);
    const double scale = A > 0 ? given_total / (b * A) : 0;
    double given = 0, gil_part = 0;
    for (const Candidate& c : cands) {
      const double share = b * c.a * scale;
      const std::string name = c.key.substr(c.key.find(':') + 1);
      const double run = std::clamp(c.who->run_in(p.start, p.end), 0.0, L);
      add(c.kind, name, c.who, share, run, L, site, around.inner);
      if (!c.who->blocked_in.points.empty())
        parties[c.key].off_cpu[c.who->blocked_in.at(mid, int64_t(BlockedIn::kUnknown))] += L - run;
      if (waker && c.who->kind == Activity::Kind::kThread && c.who->id == waker->thread &&
          counted_wakes.insert(around.inner).second)  // once per wait call, however many pieces it spans
        ++parties[c.key].party.wakeups;
      given += share;
      if (c.kind == Kind::kGil) gil_part += share;
    }
    (p.dispatch_gap ? step_total.gap_gil : step_total.gil) += gil_part;
    if (b - given > 1) add(Kind::kUnknown, "", nullptr, b - given, 0, L, site, around.inner);
  }

  // Hot frames of each party's members during the waits; their sites; their CPU per step over the steady span.
  std::unordered_map<uint32_t, const Activity*> activity_of_thread, activity_of_child;
  for (const Activity& o : act.others) activity_of_thread[o.id] = &o;
  for (const Activity& c : act.children) activity_of_child[c.id] = &c;
  std::unordered_map<uint32_t, const ChildFrames*> child_of;
  for (const ChildFrames& c : child_frames) child_of[c.pid] = &c;
  for (auto& [key, acc] : parties) {
    WaitParty& party = acc.party;
    party.members.assign(acc.members.begin(), acc.members.end());
    for (uint32_t m : party.members) {
      const auto& index = party.kind == Kind::kProcesses ? activity_of_child : activity_of_thread;
      if (auto it = index.find(m); it != index.end())
        party.cpu_per_step_ns += it->second->run_in(nm.span_start, nm.span_end) / double(std::max<size_t>(1, nm.steady_steps));
    }
    for (auto& [id, n] : acc.names) party.member_names.push_back(n);
    if (party.members.size() == 1 && !party.member_names.empty() && !party.member_names[0].empty())
      party.name = party.member_names[0];  // a pool of one is that thread
    party.hot = hot_frames_of(party, f, child_of, nm);
    auto off = std::max_element(acc.off_cpu.begin(), acc.off_cpu.end(), [](auto& x, auto& y) { return x.second < y.second; });
    if (off != acc.off_cpu.end() && party.span_ns > 0) {
      party.off_cpu_in = BlockedIn(off->first);
      party.off_cpu_share = off->second / (party.span_ns * double(std::max<size_t>(1, party.members.size())));
    }
    auto site = std::max_element(acc.sites.begin(), acc.sites.end(), [](auto& x, auto& y) { return x.second < y.second; });
    if (site != acc.sites.end()) party.site = site->first;
    out.parties.push_back(std::move(party));
  }
  std::sort(out.parties.begin(), out.parties.end(), [](const WaitParty& x, const WaitParty& y) {
    return x.blocked_ns != y.blocked_ns ? x.blocked_ns > y.blocked_ns : x.name < y.name;
  });
  // Where the step thread sat while blocked.
  {
    std::map<std::string, double> sites;
    for (auto& [code, ns] : f.step.py_ns) sites[nm.code_name(code)] += ns;
    for (auto& [name, ns] : f.step.range_ns) sites["range " + nm.range_name(name)] += ns;
    for (auto& [name, ns] : sites) out.sites.emplace_back(name, ns);
    std::sort(out.sites.begin(), out.sites.end(), [](auto& x, auto& y) { return x.second > y.second; });
    if (out.sites.size() > 5) out.sites.resize(5);
  }
  // Child process groups: how many, and their CPU per steady step over the steady span.
  for (const Activity& c : act.children) {
    auto& g = out.child_groups[c.name.empty() ? "process" : c.name];
    const double cpu = c.run_in(nm.span_start, nm.span_end);
    if (cpu <= 0) continue;
    ++g.first;
    g.second += cpu / double(std::max<size_t>(1, nm.steady_steps));
  }
  return out;
}

}  // namespace inferscope::analyze::detail
