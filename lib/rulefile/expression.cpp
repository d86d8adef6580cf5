// Rule-file expressions through muparser (expression.hpp). Each evaluation builds its own parser with the values
// of one analysis, so one compiled rule set serves several analyses at once (the ranks of a run, analysed in
// parallel) without shared state.
#include "rulefile/expression.hpp"

#include "text/edit_distance.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

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

// "; did you mean a, b?" for the names offered, else "; " + `otherwise`.
std::string offer_text(const std::vector<std::string>& offer, const std::string& otherwise) {
  if (offer.empty()) return "; " + otherwise;
  std::string out = "; did you mean ";
  for (size_t i = 0; i < offer.size(); ++i) out += (i ? ", " : "") + offer[i];
  return out + "?";
}

std::string did_you_mean(const std::string& unknown) {
  return offer_text(rules::closest_metric_names(unknown), "docs/rules.md lists every metric (iscope-analyze --list-metrics)");
}

// A control character (a NUL from a binary file, a tab is fine) or a non-ASCII one outside a quoted name (a
// no-break or zero-width space pasted from a web page): muparser would report an invisible "unexpected token".
void refuse_invisible(const std::string& text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"') in_string = !in_string;
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      char b[8];
      std::snprintf(b, sizeof(b), "0x%02x", c);
      throw ExpressionError(i, std::string("a control character (") + b + ")");
    }
    if (c >= 0x80 && !in_string)
      throw ExpressionError(i, "a character that is not ASCII (a no-break or zero-width space pasted with the text?); "
                               "expressions are ASCII outside quoted names");
  }
}

// Every name that is no metric, in one message: a typo, a named metric without its name, a number out of range.
void refuse_unknown(const std::string& text, const std::vector<std::string>& used) {
  std::string message;
  size_t first = std::string::npos;
  for (const std::string& name : used) {
    if (rules::find_metric(name)) continue;
    std::string one;
    if (rules::find_named_metric(name)) one = name + " takes a name in double quotes, e.g. " + name + "(\"tokenize\")";
    else if (std::isdigit(static_cast<unsigned char>(name[0]))) one = "'" + name + "' is not a number it can read (out of range?)";
    else one = "unknown metric '" + name + "'" + did_you_mean(name);
    message += (message.empty() ? "" : "; ") + one;
    first = std::min(first, offset_of_word(text, name));
  }
  if (!message.empty()) throw ExpressionError(first == std::string::npos ? 0 : first, message);
}

// muparser's own functions (sin, min, atan2, ...), which a condition may call beside the named metrics: asked of
// the installed muparser, so the list follows its version.
bool is_builtin_function(const std::string& name) {
#if INFERSCOPE_HAVE_MUPARSER
  static const std::set<std::string> builtin = [] {
    std::set<std::string> out;
    mu::Parser p;
    for (const auto& [n, fn] : p.GetFunDef()) out.insert(n);
    return out;
  }();
  return builtin.count(name) > 0;
#else
  (void)name;
  return false;
#endif
}

// The named metrics worth offering for an unknown function: the closest by spelling, then the others of the same
// kind (`range_ms(` offers every range_* metric: the one meant may be a different word, mean or total).
std::string named_metric_hint(const std::string& unknown) {
  std::vector<std::string_view> names;
  for (const rules::NamedMetric& m : rules::named_metrics()) names.emplace_back(m.name);
  std::vector<std::string> offer = text::closest_names(unknown, names, 3);
  const size_t underscore = unknown.find('_');
  if (underscore != std::string::npos && underscore > 0)
    for (std::string_view n : names)
      if (n.substr(0, underscore + 1) == std::string_view(unknown).substr(0, underscore + 1) &&
          std::find(offer.begin(), offer.end(), n) == offer.end())
        offer.emplace_back(n);
  return offer_text(offer, "docs/rules.md lists every metric that takes a name (iscope-analyze --list-metrics)");
}

// A name called like a function that is neither a named metric nor one of muparser's: muparser itself would answer
// "Unexpected parenthesis" at the '(' and never say which name it did not know.
void refuse_unknown_functions(const std::string& text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') in_string = !in_string;
    if (in_string || !is_name_char(text[i]) || (i > 0 && is_name_char(text[i - 1]))) continue;
    size_t end = i;
    while (end < text.size() && is_name_char(text[end])) ++end;
    size_t after = end;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
    const std::string name = text.substr(i, end - i);
    if (after < text.size() && text[after] == '(' && !std::isdigit(static_cast<unsigned char>(name[0])) &&
        !rules::find_named_metric(name) && !is_builtin_function(name)) {
      if (rules::find_metric(name))
        throw ExpressionError(i, name + " is a metric, not a function: write it without parentheses");
      throw ExpressionError(i, "unknown function '" + name + "'" + named_metric_hint(name));
    }
    i = end - 1;
  }
}

// The offset of the first ',' outside parentheses and quotes.
size_t first_top_level_comma(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') in_string = !in_string;
    if (in_string) continue;
    if (text[i] == '(') ++depth;
    if (text[i] == ')') --depth;
    if (text[i] == ',' && depth == 0) return i;
  }
  return 0;
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

// Set when an operator met or made a value that is not finite (x/0, sqrt(-1) compared, log(0)): muparser's own
// operators would carry it on silently, and `h2d_ms / d2h_ms > 3` would hold with nothing copied back. One flag per
// thread: each evaluation clears it first, and the analyses of several ranks evaluate on threads of their own.
thread_local bool t_not_finite = false;
double seen(double v) {
  if (!std::isfinite(v)) t_not_finite = true;
  return v;
}
#define ISCOPE_OPERATOR(fn, expr) \
  double fn(double a, double b) {       \
    seen(a);                            \
    seen(b);                            \
    return seen(expr);                  \
  }
ISCOPE_OPERATOR(op_add, a + b)
ISCOPE_OPERATOR(op_sub, a - b)
ISCOPE_OPERATOR(op_mul, a * b)
ISCOPE_OPERATOR(op_div, a / b)
ISCOPE_OPERATOR(op_pow, std::pow(a, b))
ISCOPE_OPERATOR(op_lt, double(a < b))
ISCOPE_OPERATOR(op_gt, double(a > b))
ISCOPE_OPERATOR(op_le, double(a <= b))
ISCOPE_OPERATOR(op_ge, double(a >= b))
ISCOPE_OPERATOR(op_eq, double(a == b))
ISCOPE_OPERATOR(op_ne, double(a != b))
ISCOPE_OPERATOR(op_and, double(a != 0 && b != 0))
ISCOPE_OPERATOR(op_or, double(a != 0 || b != 0))
#undef ISCOPE_OPERATOR

// muparser's binary operators replaced by ones that notice non-finite values; the ternary ?: and the signs stay
// muparser's, '=' (assignment) is gone.
void define_operators(mu::Parser& p) {
  p.EnableBuiltInOprt(false);
  p.DefineOprt("+", op_add, mu::prADD_SUB);
  p.DefineOprt("-", op_sub, mu::prADD_SUB);
  p.DefineOprt("*", op_mul, mu::prMUL_DIV);
  p.DefineOprt("/", op_div, mu::prMUL_DIV);
  p.DefineOprt("^", op_pow, mu::prPOW, mu::oaRIGHT);
  p.DefineOprt("<", op_lt, mu::prCMP);
  p.DefineOprt(">", op_gt, mu::prCMP);
  p.DefineOprt("<=", op_le, mu::prCMP);
  p.DefineOprt(">=", op_ge, mu::prCMP);
  p.DefineOprt("==", op_eq, mu::prCMP);
  p.DefineOprt("!=", op_ne, mu::prCMP);
  p.DefineOprt("&&", op_and, mu::prLAND);
  p.DefineOprt("||", op_or, mu::prLOR);
}

// A parser with the named metrics defined against `state`, the given metrics bound to `values` (same order).
struct BoundParser {
  mu::Parser parser;
  std::vector<NamedCall> calls;
  BoundParser(const std::string& text, EvalState& state, const std::vector<std::string>& names, std::vector<double>& values)
      : calls(rules::named_metrics().size()) {
    define_operators(parser);
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
  if (text.size() > kMaxExpressionChars)
    throw ExpressionError(0, "longer than " + std::to_string(kMaxExpressionChars) + " characters");
  refuse_invisible(text);
  refuse_assignment(text);
  refuse_unknown_functions(text);
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
  refuse_unknown(text, used);
  try {  // a full parse with every metric defined: what GetUsedVar tolerates (a string where a number goes)
    std::vector<double> zeros(used.size(), 1.0);
    BoundParser p(text, state, used, zeros);
    p.parser.Eval();
    // muparser reads "a, b" as two results and answers the last: a condition of two parts would test only one.
    if (p.parser.GetNumResults() > 1)
      throw ExpressionError(first_top_level_comma(text), "a comma separates a function's arguments only; join two "
                                                         "conditions with && or ||");
  } catch (const mu::ParserError& x) {
    throw ExpressionError(offset_of(x, text), friendly(x));
  }
  e.metrics_ = std::move(used);
  return e;
}

Evaluation Expression::evaluate(const rules::RuleInput& in) const {
  Evaluation out;
  t_not_finite = false;
  std::vector<double> values;
  for (const std::string& name : metrics_) {
    const rules::Metric* m = rules::find_metric(name);
    values.push_back(m->value(in));
    out.inputs.push_back({name, values.back(), m->unit});
  }
  EvalState state{&in, &out};
  BoundParser p(text_, state, metrics_, values);
  out.value = p.parser.Eval();
  out.not_finite = t_not_finite || !std::isfinite(out.value);
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
