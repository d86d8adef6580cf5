// What a Python function's name says about token generation: whether it is a generation call (generate, decode,
// next_token, sample_token) and whether its class is a generating model (GPT2LMHeadModel, LlamaForCausalLM,
// T5ForConditionalGeneration). The analyzer's generation stage (generation.hpp) and the live tap's serving meter
// (lib/live/serving_meter.hpp) both ask. Header-only, in lib/text with the other readings of names: the runtime's
// live library and the analyzer both depend on it, and neither on the other.
#pragma once

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace inferscope::text {

/// A loop that calls the model fewer times than this per step is not analysed as generation: with 4 calls, a step
/// gives 3 decode intervals, the fewest from which a median means something, and a model called two or three
/// times per step is more often an encoder/decoder pair or a retry than a token loop.
inline constexpr size_t kMinTokenCalls = 4;

namespace token_names {
inline std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
inline bool has(const std::string& haystack, const char* needle) { return haystack.find(needle) != std::string::npos; }
}  // namespace token_names

/// "GPT2LMHeadModel.forward" -> class "GPT2LMHeadModel", function "forward"; "main.<locals>.generate" -> class
/// "<locals>", function "generate"; "generate" -> class "", function "generate".
inline std::pair<std::string, std::string> split_qualname(const std::string& q) {
  const size_t dot = q.rfind('.');
  if (dot == std::string::npos) return {"", q};
  std::string cls = q.substr(0, dot);
  if (const size_t inner = cls.rfind('.'); inner != std::string::npos) cls = cls.substr(inner + 1);
  return {cls, q.substr(dot + 1)};
}

/// A function name that says it generates or decodes tokens (the function's own name, not its class: a
/// TransformerDecoderLayer's forward is a layer, not a decode step).
inline bool generating_function(const std::string& fn) {
  const std::string f = token_names::lower(fn);
  using token_names::has;
  return has(f, "generat") || has(f, "decod") || has(f, "next_token") || has(f, "sample_token");
}

/// Whether a function's name says it generates (generate, decode, next_token, sample_token: its last part).
inline bool generating_name(const std::string& qualname) { return generating_function(split_qualname(qualname).second); }

/// torch.profiler names a module's call "nn.Module: GPT2LMHeadModel_0" (the class and an instance number).
inline std::string profiler_module_class(const std::string& name) {
  constexpr std::string_view prefix = "nn.Module: ";
  if (name.compare(0, prefix.size(), prefix) != 0) return "";
  std::string cls = name.substr(prefix.size());
  const size_t under = cls.rfind('_');
  if (under != std::string::npos && under + 1 < cls.size() &&
      cls.find_first_not_of("0123456789", under + 1) == std::string::npos)
    cls.resize(under);
  return cls;
}

/// What says a repeated call is a generating model's, from its class alone ("" for nothing): a model class of the
/// generating kinds (…ForCausalLM, …LMHeadModel, …ForConditionalGeneration, …Seq2SeqLM, a class named …LM).
inline std::string model_class_marker(const std::string& token_function) {
  std::string cls = profiler_module_class(token_function);
  if (cls.empty()) cls = split_qualname(token_function).first;
  const std::string c = token_names::lower(cls);
  using token_names::has;
  if (has(c, "maskedlm")) return "";  // a masked LM fills in tokens; called per position, it scores, not generates
  for (const char* kind : {"causallm", "lmhead", "conditionalgeneration", "seq2seqlm"})
    if (has(c, kind)) return "model class " + cls;
  if (cls.size() > 2 && cls.compare(cls.size() - 2, 2, "LM") == 0) return "model class " + cls;
  return "";
}

}  // namespace inferscope::text
