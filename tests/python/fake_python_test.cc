// python_frames_init against a stand-in for CPython: this executable exports the symbols the reader looks
// up (ENABLE_EXPORTS), with Py_Version = MEMTRACE_FAKE_PY_VERSION and a _PyRuntime of zeros, to check the
// versions it must refuse and the reason it gives for each.
#include <gtest/gtest.h>

#include "stacks/python_frames.h"

// `extern "C"` without braces: a const definition that still has external linkage.
extern "C" __attribute__((visibility("default"))) const unsigned long Py_Version = MEMTRACE_FAKE_PY_VERSION;
extern "C" {
__attribute__((visibility("default"))) uint64_t _PyRuntime[128] = {};  // no _Py_DebugOffsets cookie
__attribute__((visibility("default"))) uint64_t PyCode_Type[8] = {};
__attribute__((visibility("default"))) uint64_t PyUnicode_Type[8] = {};
__attribute__((visibility("default"))) uint64_t PyBytes_Type[8] = {};
__attribute__((visibility("default"))) void* PyGILState_GetThisThreadState() { return nullptr; }
}

namespace memtrace {
namespace {

TEST(PythonFramesFakeRuntime, RefusesWithAReason) {
  uint32_t hex_version = 0;
  EXPECT_EQ(python_frames_init(&hex_version), PythonSupport::kUnsupported);
  EXPECT_EQ(hex_version, MEMTRACE_FAKE_PY_VERSION);
  EXPECT_STREQ(python_frames_unsupported_reason(), MEMTRACE_FAKE_REASON);
  PythonFrameView view;
  EXPECT_EQ(python_frames_read(&view, 1), 0);
  EXPECT_FALSE(python_is_finalizing());
}

}  // namespace
}  // namespace memtrace
