// The report's number formats that a reader compares by eye.
#include <gtest/gtest.h>

#include "util/format.h"

namespace memtrace {
namespace {

TEST(FormatInterval, WholeMicrosecondsBelowAMillisecondSecondsFromIt) {
  EXPECT_EQ(format_interval(0.000014), "14 us");     // 14 us: "0.000 s" would say nothing
  EXPECT_EQ(format_interval(0.0000004), "0 us");     // 0.4 us rounds to 0
  EXPECT_EQ(format_interval(0.0009996), "1000 us");  // still below 1 ms: 999.6 us rounds to 1000
  EXPECT_EQ(format_interval(0.001), "0.001 s");      // from 1 ms on, as format_seconds
  EXPECT_EQ(format_interval(0.060), "0.060 s");
  EXPECT_EQ(format_interval(12.3456), "12.346 s");
}

// PY_VERSION_HEX = major << 24 | minor << 16 | micro << 8 | release level << 4 | serial.
TEST(FormatPythonVersion, EachReleaseLevelAsCPythonWritesIt) {
  // 3 << 24 | 12 << 16 | 3 << 8 | 0xF << 4 | 0 = 0x030C03F0 = 51119088, what --json printed before.
  EXPECT_EQ(format_python_version(51119088), "3.12.3");
  EXPECT_EQ(format_python_version(0x030D00C1), "3.13.0rc1");  // level 0xC, serial 1
  EXPECT_EQ(format_python_version(0x030E00B1), "3.14.0b1");   // level 0xB, serial 1
  EXPECT_EQ(format_python_version(0x030E00A2), "3.14.0a2");   // level 0xA, serial 2
  EXPECT_EQ(format_python_version(0x030B07F0), "3.11.7");
  EXPECT_EQ(format_python_version(0x030A0FF0), "3.10.15");     // micro 0x0F = 15: two digits
  EXPECT_EQ(format_python_version(0x030C0350), "0x030C0350");  // level 5 is none of CPython's: the number
}

}  // namespace
}  // namespace memtrace
