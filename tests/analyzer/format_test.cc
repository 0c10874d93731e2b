// The report's number formats that a reader compares by eye.
#include <gtest/gtest.h>

#include "format.h"

namespace memtrace {
namespace {

TEST(FormatInterval, WholeMicrosecondsBelowAMillisecondSecondsFromIt) {
  EXPECT_EQ(format_interval(0.000014), "14 us");   // 14 us: "0.000 s" would say nothing
  EXPECT_EQ(format_interval(0.0000004), "0 us");   // 0.4 us rounds to 0
  EXPECT_EQ(format_interval(0.0009996), "1000 us");  // still below 1 ms: 999.6 us rounds to 1000
  EXPECT_EQ(format_interval(0.001), "0.001 s");    // from 1 ms on, as format_seconds
  EXPECT_EQ(format_interval(0.060), "0.060 s");
  EXPECT_EQ(format_interval(12.3456), "12.346 s");
}

}  // namespace
}  // namespace memtrace
