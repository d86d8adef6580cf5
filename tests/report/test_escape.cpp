#include "report/escape.hpp"

#include <doctest/doctest.h>

using namespace inferscope::report;

TEST_CASE("valid_utf8 keeps well-formed text and replaces stray bytes") {
  CHECK(valid_utf8("héllo ✓ 𝄞") == "héllo ✓ 𝄞");
  CHECK(valid_utf8("a\xff" "b") == "a\xEF\xBF\xBD" "b");
  CHECK(valid_utf8("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");          // overlong '/'
  CHECK(valid_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(valid_utf8("\xE2\x9C") == "\xEF\xBF\xBD\xEF\xBF\xBD");          // cut short
}

TEST_CASE("json_quote escapes quotes, backslashes and control characters") {
  CHECK(json_quote("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\n\\u0001\"");
  CHECK(json_quote("\xff") == "\"\xEF\xBF\xBD\"");
}

TEST_CASE("html_escape neutralises markup") {
  CHECK(html_escape("<script>alert('x')</script> & \"q\"") ==
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
}

TEST_CASE("md_escape keeps table cells on one line and pipes literal") {
  CHECK(md_escape("a|b\nc_d*e") == "a\\|b c_d\\*e");  // an underscore inside a word stays as it is
  CHECK(md_escape("_x and y_ #1") == "\\_x and y\\_ #1");
  CHECK(md_escape("# not a heading") == "\\# not a heading");
  CHECK(md_escape("<b>") == "\\<b\\>");
}

TEST_CASE("md_prose puts names with angle brackets in code spans and escapes the rest") {
  // The analyzer's warning as it reads on a real unannotated program: the name greps as typed.
  CHECK(md_prose("the calls of the Python function 'main.<locals>.handle_request' (repeated)") ==
        "the calls of the Python function `main.<locals>.handle_request` (repeated)");
  CHECK(md_prose("cudaFree from main.<locals>.serve (app.py:27) x13, 1.1 ms; next") ==
        "cudaFree from `main.<locals>.serve` (app.py:27) x13, 1.1 ms; next");
  CHECK(md_prose("in <module>.") == "in `<module>`.");
  CHECK(md_prose("std::vector<int>::push_back, then") == "`std::vector<int>::push_back`, then");
  // Not names: no letter, or characters a name does not have; other text is escaped as md_escape does.
  CHECK(md_prose("p90 <= 2 ms -> ok") == "p90 \\<= 2 ms -\\> ok");
  CHECK(md_prose("a <b|c> d") == "a \\<b\\|c\\> d");
  CHECK(md_prose("# *x* _y_ snake_case") == "\\# \\*x\\* \\_y\\_ snake_case");
  // A name with spaces inside its brackets is one span; a name cut short keeps its ellipsis outside.
  CHECK(md_prose("calls of '<code 12>' and std::map<int, float>::at here") ==
        "calls of `<code 12>` and `std::map<int, float>::at` here");
  CHECK(md_prose("in main.<locals>.hand\xE2\x80\xA6") == "in `main.<locals>.hand`\xE2\x80\xA6");
  CHECK(md_prose("a < b and c > d") == "a \\< b and c \\> d");  // not a name: no letter right after '<'
  CHECK(md_prose("std::map<int, never closed") == "`std::map<int`, never closed");  // the one word, alone
  CHECK(md_prose("") == "");
  CHECK(md_prose("two  spaces ") == "two  spaces ");
}

TEST_CASE("truncate cuts at a character boundary") {
  CHECK(truncate("abcdef", 4) == "abc\xE2\x80\xA6");
  CHECK(truncate("ab", 4) == "ab");
  CHECK(truncate("✓✓✓✓✓", 3) == "✓✓\xE2\x80\xA6");
}

TEST_CASE("fmt is fixed-point and never prints -0") {
  CHECK(fmt(3.14159, 2) == "3.14");
  CHECK(fmt(-0.0001, 2) == "0.00");
  CHECK(fmt(1.0 / 0.0, 2) == "n/a");
}

TEST_CASE("md_code keeps a name verbatim with a fence longer than its backtick runs") {
  CHECK(md_code("launch_bound") == "`launch_bound`");
  CHECK(md_code("a<b>_c*") == "`a<b>_c*`");  // nothing escaped: grep finds the name
  CHECK(md_code("a`b\nc") == "``a`b c``");
  CHECK(md_code("x``y") == "```x``y```");
  CHECK(md_code("`x") == "`` `x ``");    // a space each side, stripped by the reader, keeps the fence apart
  CHECK(md_code(" x ") == "`  x  `");    // the name's own spaces survive the stripping
  CHECK(md_code("") == "` `");
  CHECK(md_code("\xff") == "`\xEF\xBF\xBD`");
}

TEST_CASE("md_cell escapes only pipes") {
  CHECK(md_cell("`a|b_c<d>`") == "`a\\|b_c<d>`");
}

TEST_CASE("fmt_value prints integers without decimals and cuts trailing zeros") {
  CHECK(fmt_value(412) == "412");
  CHECK(fmt_value(9.1) == "9.1");
  CHECK(fmt_value(0.12345) == "0.123");
}
