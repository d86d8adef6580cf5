// Whether this test binary is built with AddressSanitizer or ThreadSanitizer (GCC says so with __SANITIZE_*__,
// Clang with __has_feature): ISCOPE_TEST_ASAN / ISCOPE_TEST_SANITIZED for the preprocessor, kSanitizedBuild for
// code. A sanitized library cannot be preloaded into an uninstrumented program, and LeakSanitizer needs its
// suppressions, so some cases differ.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define ISCOPE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ISCOPE_TEST_ASAN 1
#endif
#endif

#if defined(ISCOPE_TEST_ASAN) || defined(__SANITIZE_THREAD__)
#define ISCOPE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ISCOPE_TEST_SANITIZED 1
#endif
#endif

namespace inferscope::testsupport {
#if defined(ISCOPE_TEST_SANITIZED)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
}  // namespace inferscope::testsupport
