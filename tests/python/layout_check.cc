// Checks the reader's layout for one CPython version against offsetof() from that version's internal
// headers (layout_check_offsets.c): the built-in table for 3.11/3.12, the layout read from the live
// _PyRuntime's _Py_DebugOffsets for 3.13.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "layout_fields.h"
#include "stacks/python_frames.h"

namespace memtrace {
namespace {

TEST(PythonLayout, MatchesTheInternalHeaders) {
  ExpectedLayout expected{};
  expected_layout(&expected);
  PythonLayout layout{};
  if (expected.minor_version == 11 || expected.minor_version == 12) {
    ASSERT_TRUE(python_builtin_layout(static_cast<uint32_t>(expected.minor_version), &layout));
  } else {
    const void* runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
    ASSERT_NE(runtime, nullptr);
    const char* why = "";
    ASSERT_TRUE(python_layout_from_debug_offsets(runtime, &layout, &why)) << why;
  }
#define MEMTRACE_CHECK_FIELD(name) EXPECT_EQ(static_cast<int64_t>(layout.name), expected.name) << #name;
  MEMTRACE_LAYOUT_FIELDS(MEMTRACE_CHECK_FIELD)
#undef MEMTRACE_CHECK_FIELD
}

}  // namespace
}  // namespace memtrace
