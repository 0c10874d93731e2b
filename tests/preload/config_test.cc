#include "record/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <utility>

#include "stacks/intern_table.h"

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

// The launcher's variables: whole numbers below 2^32 only, silently absent otherwise; SLURM_JOB_ID before
// TORCHELASTIC_RUN_ID.
TEST(ConfigLoad, ReadsRankWorldSizeAndJobId) {
  setenv("RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("SLURM_JOB_ID", "12345", 1);
  setenv("TORCHELASTIC_RUN_ID", "run-7", 1);
  Config c;
  config_load(&c);
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_STREQ(c.job_id, "12345");
  EXPECT_EQ(c.job_id_source, JobIdSource::kSlurmJobId);

  setenv("RANK", "4294967295", 1);  // 2^32 - 1: the largest kept
  setenv("LOCAL_RANK", "-1", 1);
  setenv("WORLD_SIZE", "4294967296", 1);
  unsetenv("SLURM_JOB_ID");
  config_load(&c);
  EXPECT_EQ(c.rank, 4294967295);
  EXPECT_EQ(c.local_rank, kNoJobNumber);
  EXPECT_EQ(c.world_size, kNoJobNumber);
  EXPECT_STREQ(c.job_id, "run-7");
  EXPECT_EQ(c.job_id_source, JobIdSource::kTorchelasticRunId);

  setenv("RANK", " 2", 1);
  unsetenv("LOCAL_RANK");
  setenv("WORLD_SIZE", "", 1);
  // A 300-byte id whose 255th byte begins a 2-byte UTF-8 character: cut before it, at 254 bytes.
  std::string long_id(254, 'a');
  long_id += "\xc3\xa9";
  long_id += std::string(44, 'b');
  setenv("TORCHELASTIC_RUN_ID", long_id.c_str(), 1);
  config_load(&c);
  EXPECT_EQ(c.rank, kNoJobNumber);
  EXPECT_EQ(c.local_rank, kNoJobNumber);
  EXPECT_EQ(c.world_size, kNoJobNumber);
  EXPECT_EQ(std::string(c.job_id), std::string(254, 'a'));

  unsetenv("TORCHELASTIC_RUN_ID");
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  config_load(&c);
  EXPECT_STREQ(c.job_id, "");
  EXPECT_EQ(c.job_id_source, JobIdSource::kNone);
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
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "memtrace: MEMTRACE_MAX_FRAMES=\"" + std::string(bad) +
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

// config_bool's result and what it printed on stderr.
std::pair<bool, std::string> read_bool(const char* value, bool unset_value, bool unreadable_value,
                                       const char* because = nullptr) {
  if (value) setenv("MEMTRACE_TEST_BOOL", value, 1);
  else unsetenv("MEMTRACE_TEST_BOOL");
  testing::internal::CaptureStderr();
  const bool result = config_bool("MEMTRACE_TEST_BOOL", unset_value, unreadable_value, because);
  std::string printed = testing::internal::GetCapturedStderr();
  unsetenv("MEMTRACE_TEST_BOOL");
  return {result, printed};
}

TEST(ConfigBool, TakesTheUsualSpellingsInAnyCaseSilently) {
  for (const char* yes : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"}) {
    // unset_value and unreadable_value false: only reading the word can give true.
    EXPECT_EQ(read_bool(yes, false, false), std::make_pair(true, std::string())) << yes;
  }
  for (const char* no : {"0", "false", "FALSE", "no", "No", "off", "OFF"}) {
    EXPECT_EQ(read_bool(no, true, true), std::make_pair(false, std::string())) << no;
  }
}

TEST(ConfigBool, UnsetOrEmptyGivesTheDefaultSilently) {
  EXPECT_EQ(read_bool(nullptr, true, false), std::make_pair(true, std::string()));
  EXPECT_EQ(read_bool("", true, false), std::make_pair(true, std::string()));
  EXPECT_EQ(read_bool(nullptr, false, true), std::make_pair(false, std::string()));
}

TEST(ConfigBool, AnythingElseGivesTheFallbackAndSaysSo) {
  // Neither a number other than 0/1, a blank around a word, a prefix nor a typo is guessed at.
  for (const char* bad : {"2", " 1", "1 ", "y", "tru", "enable"}) {
    EXPECT_EQ(read_bool(bad, false, true),
              std::make_pair(true, "memtrace: MEMTRACE_TEST_BOOL=\"" + std::string(bad) +
                                       "\" is not 1/0, true/false, yes/no or on/off; using 1\n"))
        << bad;
  }
  EXPECT_EQ(read_bool("maybe", true, false, "no reason"),
            std::make_pair(false, std::string("memtrace: MEMTRACE_TEST_BOOL=\"maybe\" is not 1/0, true/false, yes/no "
                                              "or on/off; using 0 (no reason)\n")));
}

TEST(ConfigLoad, BooleanSettingsTakeTheUsualSpellings) {
  setenv("MEMTRACE_QUIET", "yes", 1);
  setenv("MEMTRACE_REDACT_ARGS", "true", 1);
  setenv("MEMTRACE_PYTHON_FRAMES", "off", 1);
  Config c;
  testing::internal::CaptureStderr();
  config_load(&c);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(c.quiet);
  EXPECT_TRUE(c.redact_args);
  EXPECT_FALSE(c.python_frames);
  setenv("MEMTRACE_QUIET", "OFF", 1);
  setenv("MEMTRACE_REDACT_ARGS", "No", 1);
  setenv("MEMTRACE_PYTHON_FRAMES", "On", 1);
  config_load(&c);
  EXPECT_FALSE(c.quiet);
  EXPECT_FALSE(c.redact_args);
  EXPECT_TRUE(c.python_frames);
  unsetenv("MEMTRACE_QUIET");
  unsetenv("MEMTRACE_REDACT_ARGS");
  unsetenv("MEMTRACE_PYTHON_FRAMES");
}

TEST(ConfigLoad, AnUnreadableRedactArgsRedacts) {
  // Unset: the command line is recorded (the default, 0).
  unsetenv("MEMTRACE_REDACT_ARGS");
  Config c;
  config_load(&c);
  EXPECT_FALSE(c.redact_args);
  // Set to something unreadable: the user asked for something, and only redacting can be what they asked for.
  setenv("MEMTRACE_REDACT_ARGS", "please", 1);
  testing::internal::CaptureStderr();
  config_load(&c);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "memtrace: MEMTRACE_REDACT_ARGS=\"please\" is not 1/0, true/false, yes/no or on/off; using 1 (the "
            "command line is not recorded)\n");
  EXPECT_TRUE(c.redact_args);
  unsetenv("MEMTRACE_REDACT_ARGS");
}

TEST(ConfigLoad, UnreadableQuietAndPythonFramesKeepTheirDefaults) {
  setenv("MEMTRACE_QUIET", "2", 1);
  setenv("MEMTRACE_PYTHON_FRAMES", "auto", 1);
  Config c;
  testing::internal::CaptureStderr();
  config_load(&c);
  // config_load reads MEMTRACE_PYTHON_FRAMES before MEMTRACE_QUIET.
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "memtrace: MEMTRACE_PYTHON_FRAMES=\"auto\" is not 1/0, true/false, yes/no or on/off; using 1\n"
            "memtrace: MEMTRACE_QUIET=\"2\" is not 1/0, true/false, yes/no or on/off; using 0\n");
  EXPECT_FALSE(c.quiet);
  EXPECT_TRUE(c.python_frames);
  unsetenv("MEMTRACE_QUIET");
  unsetenv("MEMTRACE_PYTHON_FRAMES");
}

TEST(ConfigLoad, FullBufferWarningQuotesTheValueLikeTheOthers) {
  setenv("MEMTRACE_FULL_BUFFER", "block", 1);
  Config c;
  testing::internal::CaptureStderr();
  config_load(&c);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "memtrace: MEMTRACE_FULL_BUFFER=\"block\" is neither drop nor wait; using drop\n");
  EXPECT_FALSE(c.wait_when_full);
  unsetenv("MEMTRACE_FULL_BUFFER");
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
  r.remember(6, 13);  // slot 2: slot 1 is left alone
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

// MEMTRACE_START: now (the default, also when unset or empty) or dormant; anything else is dormant with one line.
std::pair<bool, std::string> read_start(const char* value) {
  if (value) setenv("MEMTRACE_START", value, 1);
  else unsetenv("MEMTRACE_START");
  testing::internal::CaptureStderr();
  Config c;
  config_load(&c);
  std::string printed = testing::internal::GetCapturedStderr();
  unsetenv("MEMTRACE_START");
  return {c.start_dormant, printed};
}

TEST(ConfigLoad, StartIsNowUnlessDormantAndAnUnknownValueIsDormant) {
  EXPECT_EQ(read_start(nullptr), std::make_pair(false, std::string()));
  EXPECT_EQ(read_start(""), std::make_pair(false, std::string()));
  EXPECT_EQ(read_start("now"), std::make_pair(false, std::string()));
  EXPECT_EQ(read_start("dormant"), std::make_pair(true, std::string()));
  EXPECT_EQ(read_start("Dormant"),
            std::make_pair(true, std::string("memtrace: MEMTRACE_START=\"Dormant\" is neither now nor dormant; using "
                                             "dormant (no file until attach)\n")));
}

}  // namespace
}  // namespace memtrace
