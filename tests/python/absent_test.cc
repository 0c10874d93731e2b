// python_frames_init in a process without a frame reader for its Python: no CPython at all (kAbsent), or
// one older than 3.11 (kUnsupported, with the reason the tracer prints). Built once without libpython and
// once per old version found; MEMTRACE_EXPECT_UNSUPPORTED says which.
#include <gtest/gtest.h>

#include "stacks/python_frames.h"

namespace memtrace {
namespace {

TEST(PythonFramesWithoutReader, InitReadAndQueriesAreInert) {
  uint32_t hex_version = 1;
  PythonSupport support = python_frames_init(&hex_version);
  EXPECT_EQ(hex_version, 0u);  // Py_Version only exists from 3.11 on
#if MEMTRACE_EXPECT_UNSUPPORTED
  EXPECT_EQ(support, PythonSupport::kUnsupported);
  // The version comes from the name of the file that defines Py_IsInitialized (libpython3.10.so.1.0).
  EXPECT_STREQ(python_frames_unsupported_reason(), "CPython 3.10 has no frame reader (3.11, 3.12 and 3.13 have one)");
#else
  EXPECT_EQ(support, PythonSupport::kAbsent);
  EXPECT_STREQ(python_frames_unsupported_reason(), "");
#endif
  EXPECT_EQ(python_frames_init(nullptr), support);  // idempotent
  PythonFrameView views[4];
  EXPECT_EQ(python_frames_read(views, 4), 0);
  EXPECT_FALSE(python_is_finalizing());
  EXPECT_FALSE(python_is_eval_pc(reinterpret_cast<uintptr_t>(&python_frames_read)));
}

}  // namespace
}  // namespace memtrace
