// iscope-run --try's knob catalogue and protocol (tools/iscope-run/try_knobs.hpp, try_run.hpp), with the processes
// and the analysis replaced by functions: the ABBA order, the refusals after the first pair, the statistics.
#include "try_knobs.hpp"
#include "try_run.hpp"

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace iscope_run;

namespace {

const std::vector<inferscope::config::DeclaredKnob> kNoneDeclared;

std::optional<TriedKnob> parse_try(const std::string& spec, std::string& error) {
  return iscope_run::parse_try(spec, kNoneDeclared, error);
}

TriedKnob knob(const std::string& spec) {
  std::string error;
  auto k = parse_try(spec, error);
  REQUIRE_MESSAGE(k.has_value(), error);
  return *k;
}

// A fake program: each process's median step, by (tried, round); the facts and marks its dumps show.
struct Fake {
  std::map<std::pair<bool, int>, double> step_ms;
  std::set<std::string> facts = {"python", "dataloader"};
  bool applied = true;
  int fail_round = -1;
  std::string other_step_in;  // the dump whose analysis finds another step
  std::vector<std::pair<std::string, std::string>> last_env;
  std::vector<std::string> order;  // "B1", "T1", ...
  TryOutcome run(const std::vector<TriedKnob>& knobs, int rounds) {
    auto run = [&](const std::vector<std::pair<std::string, std::string>>& env, const std::string& dump) {
      last_env = env;
      order.push_back(dump);
      return dump == "T" + std::to_string(fail_round + 1) ? 3 : 0;
    };
    auto measure = [&](const std::string& dump, const std::string&) {
      Measured m;
      m.ok = true;
      m.step = dump == other_step_in ? "other" : "step";
      m.step_ms = step_ms[{dump[0] == 'T', std::stoi(dump.substr(1)) - 1}];
      m.steps = 50;
      m.facts = facts;
      m.try_applied = applied;
      return m;
    };
    return run_try(knobs, rounds, run, measure, [](bool tried, int r) { return (tried ? "T" : "B") + std::to_string(r + 1); });
  }
};

}  // namespace

TEST_CASE("try knobs: names, values and what the tried run's environment carries") {
  std::string error;
  CHECK_FALSE(parse_try("num_workerz=2", error));
  CHECK(error.find("no knob named 'num_workerz'") != std::string::npos);
  CHECK(error.find("allow_tf32") != std::string::npos);  // the list of knobs
  CHECK_FALSE(parse_try("num_workers=-1", error));
  CHECK_FALSE(parse_try("prefetch_factor=0", error));
  CHECK_FALSE(parse_try("float32_matmul_precision=low", error));
  CHECK_FALSE(parse_try("CUDA_LAUNCH_BLOCKING=1", error));  // only ever worth trying off
  CHECK_FALSE(parse_try("PYTORCH_CUDA_ALLOC_CONF=a;b", error));
  CHECK(knob("allow_tf32=ON").value == "true");
  CHECK(knob("num_workers=08").value == "8");
  CHECK(knob("allow_tf32=yes").knob.changes_results);
  CHECK_FALSE(knob("num_workers=4").knob.changes_results);
  const auto env = tried_environment({knob("num_workers=4"), knob("OMP_NUM_THREADS=2"), knob("allow_tf32=true")});
  REQUIRE(env.size() == 2);
  CHECK(env[0] == std::pair<std::string, std::string>("OMP_NUM_THREADS", "2"));
  CHECK(env[1] == std::pair<std::string, std::string>("INFERSCOPE_TRY", "num_workers=4;allow_tf32=true"));
}

TEST_CASE("try knobs: each refuses a program that lacks what it needs, and says what") {
  CHECK(refusal(knob("num_workers=4"), {"python", "dataloader"}).empty());
  const std::string why = refusal(knob("num_workers=4"), {"cpp"});
  CHECK(why.find("a Python program that builds a torch DataLoader") != std::string::npos);
  CHECK(why.find("no Python code ran, no DataLoader fed it") != std::string::npos);
  CHECK(refusal(knob("allow_tf32=true"), {"python"}).find("no fp32 matrix kernels") != std::string::npos);
  CHECK(refusal(knob("OMP_NUM_THREADS=2"), {"cpp"}).empty());
}

TEST_CASE("try protocol: ABBA pairs, the tried settings in the tried processes only, the saving and its interval") {
  Fake f;
  const double base[] = {100, 104, 98, 102, 101}, tried[] = {70, 71, 69, 72, 70};
  for (int r = 0; r < 5; ++r) f.step_ms[{false, r}] = base[r], f.step_ms[{true, r}] = tried[r];
  const TryOutcome o = f.run({knob("num_workers=4")}, 5);
  REQUIRE(o.refused.empty());
  CHECK(f.order == std::vector<std::string>{"B1", "T1", "T2", "B2", "B3", "T3", "T4", "B4", "B5", "T5"});
  CHECK(o.pairs == 5);
  CHECK(o.base_ms == doctest::Approx(101));
  CHECK(o.tried_ms == doctest::Approx(70));
  CHECK(o.low_pct == doctest::Approx(100.0 * (1 - 72.0 / 102)));  // round 4: the smallest of the five
  CHECK(o.high_pct == doctest::Approx(100.0 * (1 - 71.0 / 104)));
  CHECK(o.measurable);
  CHECK(o.noise_pct == doctest::Approx(100.0 * 6 / 101));
  CHECK(describe_outcome({knob("num_workers=4")}, o).find("measured saving: 30.") != std::string::npos);
}

TEST_CASE("try protocol: pairs either side of zero are no measurable change") {
  Fake f;
  const double base[] = {100, 100, 100}, tried[] = {97, 103, 99};
  for (int r = 0; r < 3; ++r) f.step_ms[{false, r}] = base[r], f.step_ms[{true, r}] = tried[r];
  const TryOutcome o = f.run({knob("OMP_NUM_THREADS=2")}, 3);
  CHECK_FALSE(o.measurable);
  CHECK(describe_outcome({knob("OMP_NUM_THREADS=2")}, o).find("no measurable change") != std::string::npos);
  CHECK(outcome_json({knob("OMP_NUM_THREADS=2")}, o, "cmd").find("\"measurable\":false") != std::string::npos);
}

TEST_CASE("try protocol: a knob that does not apply, or never took effect, stops after the first pair") {
  Fake native;
  native.facts = {"cpp"};
  TryOutcome o = native.run({knob("num_workers=4")}, 5);
  CHECK(o.refused.find("no DataLoader fed it") != std::string::npos);
  CHECK(native.order.size() == 1);  // the baseline only
  Fake unapplied;
  unapplied.applied = false;
  o = unapplied.run({knob("num_workers=4")}, 5);
  CHECK(o.refused.find("never took effect") != std::string::npos);
  CHECK(unapplied.order.size() == 2);
  Fake env_only;  // an environment knob needs no mark
  env_only.applied = false;
  CHECK(env_only.run({knob("OMP_NUM_THREADS=2")}, 2).refused.empty());
  Fake drifting;  // a process that finds another step: no pair
  drifting.other_step_in = "B2";
  o = drifting.run({knob("num_workers=4")}, 3);
  CHECK(o.refused.find("the processes' steps differ: 'step' in the first, 'other' in B2") != std::string::npos);
  Fake crashing;
  crashing.fail_round = 0;
  o = crashing.run({knob("num_workers=4")}, 3);
  CHECK(o.refused.find("the tried run (round 1) exited with status 3") != std::string::npos);
}

TEST_CASE("try knobs: a variable the settings file declares is a knob of its own, with its values") {
  inferscope::config::DeclaredKnob pool;
  pool.variable = "POOL_THREADS";
  pool.low = 1;
  pool.high = 64;
  pool.changes = "threads of the request pool";
  pool.where = ".inferscope.yaml:3";
  inferscope::config::DeclaredKnob mode;
  mode.variable = "SERVER_BATCHING";
  mode.choices = {"off", "dynamic"};
  mode.changes = "how requests are batched";
  mode.changes_results = true;
  mode.where = ".inferscope.yaml:7";
  const std::vector<inferscope::config::DeclaredKnob> declared = {pool, mode};
  std::string error;

  auto k = iscope_run::parse_try("POOL_THREADS=08", declared, error);
  REQUIRE_MESSAGE(k.has_value(), error);
  CHECK(k->value == "8");
  CHECK(k->knob.way == KnobWay::kDeclared);
  CHECK_FALSE(k->knob.changes_results);
  CHECK(k->knob.changes.find(".inferscope.yaml:3") != std::string::npos);
  // It reaches the program as its environment variable, and it applies whatever the baseline shows.
  const auto env = tried_environment({*k});
  REQUIRE(env.size() == 1);
  CHECK(env[0] == std::pair<std::string, std::string>("POOL_THREADS", "8"));
  CHECK(refusal(*k, {}).empty());

  CHECK_FALSE(iscope_run::parse_try("POOL_THREADS=65", declared, error));
  CHECK(error.find("an integer, 1 to 64") != std::string::npos);
  CHECK(error.find(".inferscope.yaml:3") != std::string::npos);
  auto m = iscope_run::parse_try("SERVER_BATCHING=dynamic", declared, error);
  REQUIRE(m.has_value());
  CHECK(m->knob.changes_results);
  CHECK_FALSE(iscope_run::parse_try("SERVER_BATCHING=static", declared, error));
  CHECK(error.find("off or dynamic") != std::string::npos);

  // Undeclared, it is no knob, and the message says where a program's own variables are declared.
  CHECK_FALSE(parse_try("POOL_THREADS=8", error));
  CHECK(error.find("try_knobs") != std::string::npos);
  // A declaration cannot take the name of a knob iscope-run knows.
  inferscope::config::DeclaredKnob omp = pool;
  omp.variable = "OMP_NUM_THREADS";
  CHECK(declaration_clash(omp).find(".inferscope.yaml:3") != std::string::npos);
  CHECK(declaration_clash(pool).empty());
}
