// The Python frame reader's built-in 3.11/3.12 structure offsets against offsetof() from the internal headers of
// the CPython this program is compiled with: scripts/gpu-check runs it against the GPU machine's own Python
// (Ubuntu's 3.12, the one PyTorch jobs there run), whose patch release the ctest layout checks cannot reach.
// Prints every field and exits 1 on any difference (the same comparison as tests/python/layout_check.cc).
#include <cstdint>
#include <cstdio>

#include "layout_fields.h"
#include "stacks/python_frames.h"

int main() {
  ExpectedLayout expected{};
  expected_layout(&expected);
  memtrace::PythonLayout layout{};
  if (!memtrace::python_builtin_layout(static_cast<uint32_t>(expected.minor_version), &layout)) {
    std::printf("python_layout: the reader has no built-in layout for 3.%lld\n",
                static_cast<long long>(expected.minor_version));
    return 1;
  }
  int differences = 0;
#define MEMTRACE_PRINT_FIELD(name)                                                                                     \
  {                                                                                                                    \
    const auto reader = static_cast<long long>(layout.name);                                                           \
    const auto headers = static_cast<long long>(expected.name);                                                        \
    differences += reader != headers;                                                                                  \
    std::printf("%-24s reader %6lld headers %6lld%s\n", #name, reader, headers, reader != headers ? "  DIFFERS" : ""); \
  }
  MEMTRACE_LAYOUT_FIELDS(MEMTRACE_PRINT_FIELD)
#undef MEMTRACE_PRINT_FIELD
  std::printf("python_layout: %d field(s) differ\n", differences);
  return differences == 0 ? 0 : 1;
}
