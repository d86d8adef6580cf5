// An expression of a rule file over the analysis's metrics (analyze/rules/metrics.hpp), parsed and evaluated by
// muparser: arithmetic, comparisons, && || and ?:, muparser's functions (min, max, abs, ...), the metrics by name
// and the named metrics with a name in double quotes. Never eval: muparser only knows what is defined here.
//
//   Expression e = Expression::compile("h2d_ms / step_ms > 0.3");      // throws ExpressionError
//   Evaluation v = e.evaluate(rule_input);                              // v.value, v.inputs, v.missing
#pragma once

#include "analyze/rules/metrics.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace inferscope::rulefile {

/// An expression that cannot be used: what is wrong and where, as a character offset into the expression.
class ExpressionError : public std::runtime_error {
 public:
  ExpressionError(size_t offset, const std::string& message) : std::runtime_error(message), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

/// One value an evaluation read: a metric ("h2d_ms") or a named one ("range_mean_ms(\"tokenize\")").
struct InputValue {
  std::string name;
  double value = 0;
  analyze::rules::MetricUnit unit = analyze::rules::MetricUnit::kCount;
};

struct Evaluation {
  double value = 0;
  bool not_finite = false;           ///< a value on the way was not finite (x/0, sqrt(-1), log(0)): no answer
  std::vector<InputValue> inputs;    ///< what it read, in the order first read
  std::vector<std::string> missing;  ///< named metrics whose name matched nothing in the trace (read as 0)
};

/// The longest expression read: a condition is a line or two; a longer one is a generated file gone wrong.
inline constexpr size_t kMaxExpressionChars = 4096;

class Expression {
 public:
  /// Parses `text`; throws ExpressionError for a syntax error, unknown metrics or functions (every one, with the
  /// closest known names), a named metric without a quoted name, '=' where '==' was meant, a comma outside a
  /// function's arguments, a control or non-ASCII character outside a quoted name, or more than
  /// kMaxExpressionChars.
  static Expression compile(const std::string& text);
  Evaluation evaluate(const analyze::rules::RuleInput& in) const;
  const std::string& text() const { return text_; }
  /// The metrics (not the named ones) it reads.
  const std::vector<std::string>& metrics() const { return metrics_; }
  /// It compares (<, >, <=, >=, ==, !=): what a condition must do.
  bool compares() const;

 private:
  std::string text_;
  std::vector<std::string> metrics_;
};

/// The build has muparser; without it rule files cannot be read (Expression::compile throws saying so).
bool expressions_available();

}  // namespace inferscope::rulefile
