// The --try knob catalogue (try_knobs.hpp).
#include "try_knobs.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace iscope_run {

namespace {

constexpr const char *kPython = "python", *kDataLoader = "dataloader", *kFp32Matmul = "fp32_matmul";

bool is_uint(const std::string& v) {
  return !v.empty() && v.size() < 6 && std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool is_bool(std::string v, std::string& canonical) {
  for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (v == "1" || v == "true" || v == "yes" || v == "on") canonical = "true";
  else if (v == "0" || v == "false" || v == "no" || v == "off") canonical = "false";
  else return false;
  return true;
}

// The value as the program gets it, or "" when `k` does not accept `v`.
std::string accepted(const Knob& k, const std::string& v) {
  if (k.declared) return k.declared->accepted(v);
  const std::string_view n = k.name;
  std::string b;
  if (n == "num_workers" || n == "prefetch_factor" || n == "num_threads" || n == "OMP_NUM_THREADS" ||
      n == "MKL_NUM_THREADS") {
    if (!is_uint(v)) return "";
    const long x = std::strtol(v.c_str(), nullptr, 10);
    if ((n != "num_workers" && x < 1) || x > 1024) return "";
    return std::to_string(x);
  }
  if (n == "pin_memory" || n == "persistent_workers" || n == "allow_tf32" || n == "cudnn_benchmark")
    return is_bool(v, b) ? b : "";
  if (n == "float32_matmul_precision") return v == "highest" || v == "high" || v == "medium" ? v : "";
  if (n == "CUDA_LAUNCH_BLOCKING") return v == "0" ? v : "";
  if (n == "PYTORCH_CUDA_ALLOC_CONF")
    return !v.empty() && v.find_first_of(" \t\n;") == std::string::npos ? v : "";
  return "";
}

}  // namespace

const std::vector<Knob>& knob_catalogue() {
  static const std::vector<Knob> k = {
      {"num_workers", KnobWay::kPython, "an integer, 0 to 1024",
       "the worker processes of every torch DataLoader the program builds", false, {kPython, kDataLoader},
       "a Python program that builds a torch DataLoader"},
      {"pin_memory", KnobWay::kPython, "true or false", "whether every DataLoader pins its batches in host memory",
       false, {kPython, kDataLoader}, "a Python program that builds a torch DataLoader"},
      {"persistent_workers", KnobWay::kPython, "true or false (needs num_workers above 0)",
       "whether every DataLoader keeps its workers between epochs", false, {kPython, kDataLoader},
       "a Python program that builds a torch DataLoader"},
      {"prefetch_factor", KnobWay::kPython, "an integer, 1 to 1024 (needs num_workers above 0)",
       "the batches each DataLoader worker prepares ahead", false, {kPython, kDataLoader},
       "a Python program that builds a torch DataLoader"},
      {"allow_tf32", KnobWay::kPython, "true or false",
       "torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32: fp32 matrix products on tensor "
       "cores with 10-bit mantissas",
       true, {kPython, kFp32Matmul}, "a Python program whose fp32 matrix kernels run off tensor cores"},
      {"float32_matmul_precision", KnobWay::kPython, "highest, high or medium",
       "torch.set_float32_matmul_precision: high is TF32, medium bf16 for fp32 matrix products", true,
       {kPython, kFp32Matmul}, "a Python program whose fp32 matrix kernels run off tensor cores"},
      {"cudnn_benchmark", KnobWay::kPython, "true or false",
       "torch.backends.cudnn.benchmark: cuDNN times its algorithms for each new shape and keeps the fastest", false,
       {kPython}, "a Python program"},
      {"num_threads", KnobWay::kPython, "an integer, 1 to 1024", "torch.set_num_threads: torch's CPU operator threads",
       false, {kPython}, "a Python program"},
      {"PYTORCH_CUDA_ALLOC_CONF", KnobWay::kEnvironment, "the allocator's options, e.g. expandable_segments:True",
       "PyTorch's CUDA caching allocator", false, {kPython}, "a Python program"},
      {"CUDA_LAUNCH_BLOCKING", KnobWay::kEnvironment, "0 (off: it is only ever worth trying off)",
       "whether every CUDA launch waits for the kernel to finish", false, {}, "any program"},
      {"OMP_NUM_THREADS", KnobWay::kEnvironment, "an integer, 1 to 1024", "OpenMP's thread count", false, {},
       "any program"},
      {"MKL_NUM_THREADS", KnobWay::kEnvironment, "an integer, 1 to 1024", "MKL's thread count", false, {},
       "any program"},
  };
  return k;
}

Knob declared_knob(const inferscope::config::DeclaredKnob& d) {
  Knob k;
  k.name = d.variable;
  k.way = KnobWay::kDeclared;
  k.values = d.values_text();
  k.changes = d.changes + " (declared at " + d.where + ")";
  k.changes_results = d.changes_results;
  k.applies_to = "the program whose settings file declares it";
  k.declared = d;
  return k;
}

std::string declaration_clash(const inferscope::config::DeclaredKnob& d) {
  for (const Knob& k : knob_catalogue())
    if (k.name == d.variable)
      return d.where + ": try_knobs: " + d.variable + " is a knob iscope-run already knows (" + k.changes +
             "); drop the declaration";
  return {};
}

std::optional<TriedKnob> parse_try(const std::string& spec, const std::vector<inferscope::config::DeclaredKnob>& declared,
                                   std::string& error) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    error = "--try expects KNOB=VALUE, got '" + spec + "'";
    return std::nullopt;
  }
  const std::string name = spec.substr(0, eq), value = spec.substr(eq + 1);
  std::vector<Knob> knobs = knob_catalogue();
  for (const auto& d : declared) knobs.push_back(declared_knob(d));
  for (const Knob& k : knobs) {
    if (k.name != name) continue;
    std::string v = accepted(k, value);
    if (v.empty()) {
      error = "--try " + name + ": '" + value + "' is not " + k.values +
              (k.declared ? " (the values declared at " + k.declared->where + ")" : "");
      return std::nullopt;
    }
    return TriedKnob{k, v};
  }
  error = "--try: no knob named '" + name + "'; the knobs are:";
  for (const Knob& k : knobs) error += " " + k.name;
  error += " (docs/try.md); a program's own environment variables are declared under try_knobs in its settings "
           "file (.inferscope.yaml)";
  return std::nullopt;
}

std::string refusal(const TriedKnob& k, const std::set<std::string>& facts) {
  std::vector<std::string> missing;
  for (const std::string& f : k.knob.needs)
    if (!facts.count(f)) missing.push_back(f);
  if (missing.empty()) return {};
  std::string why = k.knob.name + " applies to " + k.knob.applies_to +
                    "; the baseline run showed none (";
  for (size_t i = 0; i < missing.size(); ++i) {
    const std::string& m = missing[i];
    why += (i ? ", " : "") + std::string(m == kPython       ? "no Python code ran"
                                         : m == kDataLoader ? "no DataLoader fed it"
                                         : m == kFp32Matmul ? "no fp32 matrix kernels off tensor cores"
                                                            : m);
  }
  return why + ")";
}

std::vector<std::pair<std::string, std::string>> tried_environment(const std::vector<TriedKnob>& knobs) {
  std::vector<std::pair<std::string, std::string>> env;
  std::string python;
  for (const TriedKnob& k : knobs) {
    if (k.knob.way != KnobWay::kPython) env.emplace_back(k.knob.name, k.value);
    else python += (python.empty() ? "" : ";") + k.knob.name + "=" + k.value;
  }
  if (!python.empty()) env.emplace_back("INFERSCOPE_TRY", python);
  return env;
}

std::string describe(const std::vector<TriedKnob>& knobs) {
  std::string s;
  for (const TriedKnob& k : knobs) s += (s.empty() ? "" : " ") + k.knob.name + "=" + k.value;
  return s;
}

}  // namespace iscope_run
