// Misuse of ScopedRange must not compile (built once per SHOULD_FAIL_* case by a WILL_FAIL test). Without a
// case macro the file compiles, which proves the failures come from the misuse alone.
#include <inferscope/scope.hpp>

#include <utility>

int main() {
  ISCOPE_RANGE_VAR(r, "range");
#if defined(SHOULD_FAIL_COPY)
  inferscope::ScopedRange copy(r);
#elif defined(SHOULD_FAIL_MOVE)
  inferscope::ScopedRange moved(std::move(r));
#elif defined(SHOULD_FAIL_NEW)
  static const inferscope::detail::StaticName n{"heap", false};
  auto* p = new inferscope::ScopedRange(n);
  (void)p;
#endif
  return r.active() ? 1 : 0;
}
