// Which MEMTRACE_OUTPUT paths the tracer refuses to trace into (sink_refusal) and what it creates for the rest
// (sink_open): a trace goes into a new regular file of that name, or the next free "<stem>.N.mtrace" when the
// name is taken; a name that cannot be a trace file is refused rather than traced into a surprising file beside it.
#include "record/trace_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

namespace memtrace {
namespace {

constexpr const char* kDirectory = "it is a directory (MEMTRACE_OUTPUT names the trace file)";
constexpr const char* kNotRegular =
    "it is not a regular file (MEMTRACE_OUTPUT names the trace file; /dev/null traces without writing)";

// A fresh directory for one test, removed with everything in it at the end.
class SinkTest : public testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/memtrace-sink-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { system(("rm -rf " + dir_).c_str()); }
  std::string path(const char* name) const { return dir_ + "/" + name; }
  // sink_refusal's phrase, "" for none.
  static std::string refusal(const std::string& p) {
    const char* why = sink_refusal(p.c_str());
    return why ? why : "";
  }
  std::string dir_;
};

TEST_F(SinkTest, RefusesADirectoryWithOrWithoutASlash) {
  EXPECT_EQ(refusal(dir_), kDirectory);
  EXPECT_EQ(refusal(dir_ + "/"), kDirectory);
  ASSERT_EQ(symlink(dir_.c_str(), path("link-to-dir").c_str()), 0);
  EXPECT_EQ(refusal(path("link-to-dir")), kDirectory);  // followed: what it leads to is what would be written
}

TEST_F(SinkTest, RefusesDevicesAndFifosButNotDevNull) {
  EXPECT_EQ(refusal("/dev/zero"), kNotRegular);  // a character device anyone may write
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_EQ(refusal(path("fifo")), kNotRegular);
  EXPECT_EQ(refusal("/dev/null"), "");
  char chosen[256];
  std::unique_ptr<Sink> null_sink(sink_open("/dev/null", chosen, sizeof chosen));
  ASSERT_NE(null_sink, nullptr);
  EXPECT_STREQ(chosen, "/dev/null");
  EXPECT_TRUE(null_sink->write("x", 1));
}

TEST_F(SinkTest, RefusesTheFileAStandardStreamIsRedirectedTo) {
  // Standard input stands for the three here (gtest writes to output and error): redirected from a regular file,
  // /dev/stdin leads to that file, and the trace would have gone to a new "/dev/stdin.1".
  const std::string input = path("input.txt");
  const int fd = open(input.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  const int saved = dup(0);
  ASSERT_EQ(dup2(fd, 0), 0);
  const std::string via_dev = refusal("/dev/stdin");
  const std::string via_proc = refusal("/proc/self/fd/0");
  const std::string by_name = refusal(input);
  dup2(saved, 0);
  close(saved);
  close(fd);
  const std::string kStream = "it is the job's standard input, output or error (MEMTRACE_OUTPUT names the trace file)";
  EXPECT_EQ(via_dev, kStream);
  EXPECT_EQ(via_proc, kStream);
  EXPECT_EQ(by_name, kStream);
  EXPECT_EQ(refusal(input), "");  // once standard input is something else, a regular file like any other
}

TEST_F(SinkTest, TakesANewNameAndAnExistingFileTakesTheNextFreeOne) {
  const std::string p = path("job.mtrace");
  EXPECT_EQ(refusal(p), "");  // nothing there yet
  char chosen[256];
  std::unique_ptr<Sink> first(sink_open(p.c_str(), chosen, sizeof chosen));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(std::string(chosen), p);
  EXPECT_EQ(refusal(p), "");  // a regular file: never overwritten, the next name is used
  std::unique_ptr<Sink> second(sink_open(p.c_str(), chosen, sizeof chosen));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(std::string(chosen), path("job.1.mtrace"));
}

}  // namespace
}  // namespace memtrace
