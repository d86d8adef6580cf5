// Rule-file expressions through muparser (expression.hpp). Each evaluation builds its own parser with the values
// of one analysis, so one compiled rule set serves several analyses at once (the ranks of a run, analysed in
// parallel) without shared state.
#include "rulefile/expression.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#if INFERSCOPE_HAVE_MUPARSER
#include <muParser.h>
#endif

namespace inferscope::rulefile {
namespace {

namespace rules = analyze::rules;

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The offset of `name` as a whole word in `text`, outside string literals; 0 when not found.
size_t offset_of_word(const std::string& text, const std::string& name) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') in_string = !in_string;
    if (in_string || text.compare(i, name.size(), name) != 0) continue;
    const bool starts = i == 0 || !is_name_char(text[i - 1]);
    const bool ends = i + name.size() >= text.size() || !is_name_char(text[i + name.size()]);
    if (starts && ends) return i;
  }
  return 0;
}

// muparser reads `a = 3` as an assignment; in a condition it is always a mistake for `==`.
void refuse_assignment(const std::string& text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') in_string = !in_string;
    if (in_string || text[i] != '=') continue;
    const bool part_of_operator = (i > 0 && std::string_view("=<>!").find(text[i - 1]) != std::string_view::npos) ||
                                  (i + 1 < text.size() && text[i + 1] == '=');
    if (!part_of_operator) throw ExpressionError(i, "'=' assigns; compare with '=='");
  }
}

std::string did_you_mean(const std::string& unknown) {
  const std::vector<std::string> close = rules::closest_metric_names(unknown);
  if (close.empty()) return "; docs/rules.md lists every metric (iscope-analyze --list-metrics)";
  std::string out = "; did you mean ";
  for (size_t i = 0; i < close.size(); ++i) out += (i ? ", " : "") + close[i];
  return out + "?";
}

#if INFERSCOPE_HAVE_MUPARSER

// What one evaluation's named-metric callbacks read and write (muparser's user data).
struct EvalState {
  const rules::RuleInput* in = nullptr;  // null while compiling: the callbacks read nothing
  Evaluation* out = nullptr;
};
struct NamedCall {
  const rules::NamedMetric* metric = nullptr;
  EvalState* state = nullptr;
};

double call_named(void* data, const char* key) {
  auto* call = static_cast<NamedCall*>(data);
  EvalState& st = *call->state;
  if (!st.in) return 0;
  const rules::NamedValue v = call->metric->value(*st.in, key);
  const std::string shown = std::string(call->metric->name) + "(\"" + key + "\")";
  auto& inputs = st.out->inputs;
  if (std::none_of(inputs.begin(), inputs.end(), [&](const InputValue& x) { return x.name == shown; }))
    inputs.push_back({shown, v.value, call->metric->unit});
  if (!v.found) {
    std::string missing = std::string("no ") + call->metric->kind + " named \"" + key + "\" in this trace";
    const std::vector<std::string> close = rules::closest_trace_names(*st.in, call->metric->kind, key);
    if (!close.empty()) {
      missing += " (closest: ";
      for (size_t i = 0; i < close.size(); ++i) missing += (i ? ", \"" : "\"") + close[i] + "\"";
      missing += ")";
    }
    if (std::find(st.out->missing.begin(), st.out->missing.end(), missing) == st.out->missing.end())
      st.out->missing.push_back(std::move(missing));
  }
  return v.value;
}

// A parser with the named metrics defined against `state`, the given metrics bound to `values` (same order).
struct BoundParser {
  mu::Parser parser;
  std::vector<NamedCall> calls;
  BoundParser(const std::string& text, EvalState& state, const std::vector<std::string>& names, std::vector<double>& values)
      : calls(rules::named_metrics().size()) {
    size_t i = 0;
    for (const rules::NamedMetric& m : rules::named_metrics()) {
      calls[i] = {&m, &state};
      parser.DefineFunUserData(m.name, call_named, &calls[i], false);  // never folded: it reads the trace
      ++i;
    }
    for (size_t k = 0; k < names.size(); ++k) parser.DefineVar(names[k], &values[k]);
    parser.SetExpr(text);
  }
};

std::string friendly(const mu::ParserError& e) {
  switch (e.GetCode()) {
    case mu::ecSTRING_EXPECTED:
      return std::string(e.GetToken()) + " takes a name in double quotes, e.g. " + e.GetToken() + "(\"tokenize\")";
    case mu::ecSTR_RESULT: return "a quoted name is only an argument of a named metric, e.g. range_mean_ms(\"tokenize\")";
    default: return e.GetMsg();
  }
}

// muparser's position, except where it points past the call it means (a named metric given a number).
size_t offset_of(const mu::ParserError& e, const std::string& text) {
  if (e.GetCode() == mu::ecSTRING_EXPECTED) return offset_of_word(text, e.GetToken());
  return e.GetPos() < 0 ? 0 : std::min(size_t(e.GetPos()), text.size());
}

#endif

}  // namespace

bool expressions_available() { return INFERSCOPE_HAVE_MUPARSER != 0; }

bool Expression::compares() const {
  bool in_string = false;
  for (char c : text_) {
    if (c == '"') in_string = !in_string;
    if (!in_string && (c == '<' || c == '>' || c == '=')) return true;  // '=' alone was refused: == != <= >=
  }
  return false;
}

#if INFERSCOPE_HAVE_MUPARSER

Expression Expression::compile(const std::string& text) {
  Expression e;
  e.text_ = text;
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }))
    throw ExpressionError(0, "the expression is empty");
  refuse_assignment(text);
  std::vector<std::string> used;
  EvalState state;  // compiling: the callbacks read nothing
  Evaluation scratch;
  state.out = &scratch;
  try {
    std::vector<double> none;
    BoundParser p(text, state, {}, none);
    for (const auto& [name, ptr] : p.parser.GetUsedVar()) used.push_back(name);  // every identifier not a function
  } catch (const mu::ParserError& x) {
    throw ExpressionError(offset_of(x, text), friendly(x));
  }
  for (const std::string& name : used) {
    if (rules::find_metric(name)) continue;
    if (rules::find_named_metric(name))
      throw ExpressionError(offset_of_word(text, name), name + " takes a name in double quotes, e.g. " + name + "(\"tokenize\")");
    throw ExpressionError(offset_of_word(text, name), "unknown metric '" + name + "'" + did_you_mean(name));
  }
  try {  // a full parse with every metric defined: what GetUsedVar tolerates (a string where a number goes)
    std::vector<double> zeros(used.size(), 1.0);
    BoundParser p(text, state, used, zeros);
    p.parser.Eval();
  } catch (const mu::ParserError& x) {
    throw ExpressionError(offset_of(x, text), friendly(x));
  }
  e.metrics_ = std::move(used);
  return e;
}

Evaluation Expression::evaluate(const rules::RuleInput& in) const {
  Evaluation out;
  std::vector<double> values;
  for (const std::string& name : metrics_) {
    const rules::Metric* m = rules::find_metric(name);
    values.push_back(m->value(in));
    out.inputs.push_back({name, values.back(), m->unit});
  }
  EvalState state{&in, &out};
  BoundParser p(text_, state, metrics_, values);
  out.value = p.parser.Eval();
  return out;
}

#else

Expression Expression::compile(const std::string&) {
  throw ExpressionError(0, "this build of InferScope has no muparser (Debian: libmuparser-dev), so it cannot read "
                           "rule files; rebuild with it installed");
}
Evaluation Expression::evaluate(const rules::RuleInput&) const { return {}; }

#endif

}  // namespace inferscope::rulefile
