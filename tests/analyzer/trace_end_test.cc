// How the process ended, in words (summary text) and names (--json), for every TraceEnd.how.
#include <gtest/gtest.h>

#include "read/trace_end.h"

namespace memtrace {
namespace {

proto::TraceEnd end_of(proto::TraceEnd::How how, int32_t signal = 0) {
  proto::TraceEnd end;
  end.set_how(how);
  end.set_signal(signal);
  return end;
}

TEST(TraceEnd, EachWayAProcessEndsInWords) {
  EXPECT_EQ(describe_end(end_of(proto::TraceEnd::EXIT)), "process ended normally");
  EXPECT_EQ(describe_end(end_of(proto::TraceEnd::UNDERSCORE_EXIT)), "ended with _exit");
  EXPECT_EQ(describe_end(end_of(proto::TraceEnd::SIGNAL, 11)), "killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(describe_end(end_of(proto::TraceEnd::SIGNAL, 6)), "killed by signal 6 (SIGABRT)");
  EXPECT_EQ(describe_end(end_of(proto::TraceEnd::EXEC)), "replaced by exec");
  EXPECT_EQ(describe_end(end_of(proto::TraceEnd::DETACH)), "detached (the process ran on)");
  EXPECT_EQ(describe_end(end_of(proto::TraceEnd::SNAPSHOT_DONE)), "snapshot written (the process ran on)");
  EXPECT_EQ(describe_end(std::nullopt), "no end record (cut off: kill -9, crash or write error)");
}

TEST(TraceEnd, ValuesFromANewerWriterAreNamedNotMisread) {
  proto::TraceEnd end;
  end.set_how(static_cast<proto::TraceEnd::How>(7));
  EXPECT_EQ(end_how_name(end), "HOW_7");
  EXPECT_EQ(describe_end(end), "ended in a way this memtrace does not know (HOW_7)");
  EXPECT_EQ(signal_name(0), "signal 0");
  EXPECT_EQ(signal_name(-3), "signal -3");
  EXPECT_EQ(signal_name(1000), "signal 1000");
}

TEST(TraceEnd, JsonNames) {
  EXPECT_EQ(end_how_name(end_of(proto::TraceEnd::EXIT)), "EXIT");
  EXPECT_EQ(end_how_name(end_of(proto::TraceEnd::UNDERSCORE_EXIT)), "UNDERSCORE_EXIT");
  EXPECT_EQ(end_how_name(end_of(proto::TraceEnd::SIGNAL, 7)), "SIGNAL");
  EXPECT_EQ(end_how_name(end_of(proto::TraceEnd::EXEC)), "EXEC");
  EXPECT_EQ(end_how_name(end_of(proto::TraceEnd::DETACH)), "DETACH");
  EXPECT_EQ(end_how_name(end_of(proto::TraceEnd::SNAPSHOT_DONE)), "SNAPSHOT_DONE");
}

}  // namespace
}  // namespace memtrace
