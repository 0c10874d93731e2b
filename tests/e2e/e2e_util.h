// Helpers of the end-to-end test programs: each CUDA call is printed with its result (so a run without
// the tracer shows what the program did) and an unexpected result ends the program with status 3.
#pragma once
#include <cstdio>
#include <cstdlib>

namespace e2e {

inline void expect_result(int result, int expected, const char* call, int line) {
  std::printf("line %d: %s -> %d\n", line, call, result);
  if (result != expected) {
    std::fprintf(stderr, "line %d: %s returned %d, expected %d\n", line, call, result, expected);
    std::exit(3);
  }
}

}  // namespace e2e

#define E2E_OK(call) e2e::expect_result(static_cast<int>(call), 0, #call, __LINE__)
#define E2E_FAILS_WITH(expected, call) e2e::expect_result(static_cast<int>(call), (expected), #call, __LINE__)

constexpr size_t kMiB = 1u << 20;
