// Built with ISCOPE_DISABLE and linked WITHOUT libinferscope: that it links proves no runtime symbol is
// referenced; the nm check in CMake proves it again on the object code.
#define ISCOPE_DISABLE
#include <inferscope/scope.hpp>

#include <cstdio>

static int calls = 0;
static int side_effect() { return ++calls; }

int work(int x) {
  ISCOPE_FUNC();
  ISCOPE_RANGE("compiled_out");
  ISCOPE_RANGE_ATTRS("with_attrs", {"n", side_effect()});
  ISCOPE_RANGE_VAR(r, "var");
  r.attr({"k", 1});
  ISCOPE_MARK("mark", {"n", side_effect()});
  inferscope::mark_event("mark2", {{"k", 2}});
  inferscope::AsyncRange a("async");
  a.end();
  inferscope::set_thread_name("t");
  return x * 2;
}

int main() {
  inferscope::Session s;
  inferscope::start();
  int v = work(21);
  inferscope::flush_ring();
  inferscope::stop();
  // Attribute expressions of compiled-out macros are never evaluated.
  std::printf("%d %d %d\n", v, calls, static_cast<int>(inferscope::is_active()));
  return (v == 42 && calls == 0 && !s.ok()) ? 0 : 1;
}
