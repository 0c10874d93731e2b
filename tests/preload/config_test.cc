#include "config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "intern_table.h"

namespace memtrace {
namespace {

std::string expand(const char* pattern, size_t size = 256) {
  char out[256];
  if (!config_expand_output(pattern, 4321, "gpu7", out, size)) return "<too long>";
  return out;
}

TEST(ConfigExpandOutput, Placeholders) {
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(expand("memtrace-%h-%p.mtrace"), "memtrace-gpu7-4321.mtrace");
  EXPECT_EQ(expand("/tmp/r%r/%p%%.mtrace"), "/tmp/r0/4321%.mtrace");
  setenv("LOCAL_RANK", "5", 1);
  EXPECT_EQ(expand("%r"), "5");
  setenv("RANK", "12", 1);  // RANK wins over LOCAL_RANK
  EXPECT_EQ(expand("%r"), "12");
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(expand("%x%"), "%x%");  // unknown placeholders and a trailing % are kept as written
}

TEST(ConfigExpandOutput, RefusesWhatDoesNotFit) {
  EXPECT_EQ(expand("memtrace-%p.mtrace", 10), "<too long>");
  EXPECT_EQ(expand("123456789", 10), "123456789");  // 9 characters + NUL fit in 10
}

TEST(ConfigLoad, DefaultsAndBadValues) {
  unsetenv("MEMTRACE_OUTPUT");
  setenv("MEMTRACE_FLUSH_MS", "abc", 1);
  setenv("MEMTRACE_MAX_FRAMES", "32", 1);
  Config c;
  config_load(&c);
  EXPECT_EQ(c.flush_interval_ms, 200u);
  EXPECT_EQ(c.max_native_frames, 32u);
  EXPECT_EQ(c.buffer_bytes, size_t{8} << 20);
  EXPECT_TRUE(c.python_frames);
  EXPECT_EQ(std::string(c.output_path).rfind("memtrace-", 0), 0u);
  unsetenv("MEMTRACE_FLUSH_MS");
  unsetenv("MEMTRACE_MAX_FRAMES");
}

TEST(ConfigLoad, KeepsThirtyTwoNativeFramesByDefaultAndSixteenWithPython) {
  unsetenv("MEMTRACE_MAX_FRAMES");
  unsetenv("MEMTRACE_MAX_FRAMES_PYTHON");
  Config c;
  config_load(&c);
  EXPECT_EQ(c.max_native_frames, 32u);
  EXPECT_EQ(c.max_native_frames_python, 16u);
  // A depth asked for with MEMTRACE_MAX_FRAMES applies to Python threads too...
  setenv("MEMTRACE_MAX_FRAMES", "64", 1);
  config_load(&c);
  EXPECT_EQ(c.max_native_frames, 64u);
  EXPECT_EQ(c.max_native_frames_python, 64u);
  setenv("MEMTRACE_MAX_FRAMES", "0", 1);
  config_load(&c);
  EXPECT_EQ(c.max_native_frames_python, 0u);
  // ...unless theirs is given.
  setenv("MEMTRACE_MAX_FRAMES_PYTHON", "24", 1);
  config_load(&c);
  EXPECT_EQ(c.max_native_frames, 0u);
  EXPECT_EQ(c.max_native_frames_python, 24u);
  unsetenv("MEMTRACE_MAX_FRAMES");
  config_load(&c);
  EXPECT_EQ(c.max_native_frames, 32u);
  EXPECT_EQ(c.max_native_frames_python, 24u);
  // Out of range (0 to 256): the default.
  setenv("MEMTRACE_MAX_FRAMES_PYTHON", "300", 1);
  config_load(&c);
  EXPECT_EQ(c.max_native_frames_python, 16u);
  unsetenv("MEMTRACE_MAX_FRAMES_PYTHON");
}

TEST(ConfigLoad, ABadMaxFramesLeavesBothDepthsAtTheirDefaults) {
  // The warning says the bad value is replaced by the default (32); a value that was not used must not move the
  // Python threads' depth off its own default (16) either, as an unset MEMTRACE_MAX_FRAMES would not.
  unsetenv("MEMTRACE_MAX_FRAMES_PYTHON");
  Config c;
  for (const char* bad : {"300", "abc", "-1", "16x", " 16", "16 ", "+5", "0x10"}) {
    setenv("MEMTRACE_MAX_FRAMES", bad, 1);
    testing::internal::CaptureStderr();
    config_load(&c);
    // The value is quoted, so that a blank around it shows.
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "memtrace: MEMTRACE_MAX_FRAMES=\"" + std::string(bad) +
                  "\" is not a whole number from 0 to 256; using 32\n");
    EXPECT_EQ(c.max_native_frames, 32u) << bad;
    EXPECT_EQ(c.max_native_frames_python, 16u) << bad;
  }
  // A bad MEMTRACE_MAX_FRAMES_PYTHON next to a good MEMTRACE_MAX_FRAMES falls back to the latter.
  setenv("MEMTRACE_MAX_FRAMES", "20", 1);
  setenv("MEMTRACE_MAX_FRAMES_PYTHON", "abc", 1);
  config_load(&c);
  EXPECT_EQ(c.max_native_frames, 20u);
  EXPECT_EQ(c.max_native_frames_python, 20u);
  unsetenv("MEMTRACE_MAX_FRAMES");
  unsetenv("MEMTRACE_MAX_FRAMES_PYTHON");
}

TEST(RecentIds, RemembersTheLastKeyOfEachSlotOnly) {
  RecentIds<4> r;
  EXPECT_EQ(r.find(5), 0u);  // empty: every slot holds key 0, which no caller passes
  r.remember(5, 11);
  EXPECT_EQ(r.find(5), 11u);
  EXPECT_EQ(r.find(1), 0u);  // 1 and 5 share slot 1 (5 & 3 == 1): a different key is a miss
  r.remember(1, 12);         // and replaces it
  EXPECT_EQ(r.find(1), 12u);
  EXPECT_EQ(r.find(5), 0u);
  r.remember(6, 13);         // slot 2: slot 1 is left alone
  EXPECT_EQ(r.find(1), 12u);
  EXPECT_EQ(r.find(6), 13u);
  r.clear();
  EXPECT_EQ(r.find(1), 0u);
  EXPECT_EQ(r.find(6), 0u);
}

TEST(InternTable, GivesEachKeyOneIdAndRefusesWhenThreeQuartersFull) {
  InternTable t;
  ASSERT_TRUE(t.init(8));  // room for 6 keys (3/4 of 8)
  EXPECT_EQ(t.find(42), 0u);
  EXPECT_EQ(t.insert(42), 1u);
  EXPECT_EQ(t.insert(50), 2u);  // 42 and 50 collide in an 8-slot table (both & 7 == 2): probing
  EXPECT_EQ(t.find(42), 1u);
  EXPECT_EQ(t.find(50), 2u);
  EXPECT_EQ(t.insert(3), 3u);
  EXPECT_EQ(t.insert(4), 4u);
  EXPECT_EQ(t.insert(5), 5u);
  EXPECT_EQ(t.insert(6), 6u);
  EXPECT_EQ(t.next_id(), 7u);
  EXPECT_EQ(t.insert(7), 0u);  // full
  EXPECT_EQ(t.find(6), 6u);
  t.clear();
  EXPECT_EQ(t.find(42), 0u);
  EXPECT_EQ(t.insert(42), 1u);
}

}  // namespace
}  // namespace memtrace
