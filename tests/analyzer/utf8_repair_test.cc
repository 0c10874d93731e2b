// Text that is not UTF-8 (argv, paths, names cut mid-character) must not cost the whole record.
#include <gtest/gtest.h>

#include "read/trace_reader.h"
#include "read/utf8_repair.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

std::string repaired(std::string text, size_t* count = nullptr) {
  size_t n = repair_utf8(text.data(), text.size());
  if (count) *count = n;
  return text;
}

TEST(Utf8Repair, ValidTextIsUnchanged) {
  size_t n = 1;
  EXPECT_EQ(repaired("train.py \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", &n),
            "train.py \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(n, 0u);
}

TEST(Utf8Repair, EachInvalidByteBecomesAQuestionMark) {
  size_t n = 0;
  EXPECT_EQ(repaired("a\xff"
                     "b",
                     &n),
            "a?b");
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(repaired("cut \xe2\x82", &n), "cut ??");  // a 3-byte sequence cut after 2
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(repaired("\xc0\xaf"), "??");            // overlong '/'
  EXPECT_EQ(repaired("\xed\xa0\x80"), "???");       // a UTF-16 surrogate
  EXPECT_EQ(repaired("\xf4\x90\x80\x80"), "????");  // above U+10FFFF
}

TEST(Utf8Repair, ReaderKeepsARecordWithInvalidTextRepaired) {
  test::TraceBuilder b;
  b.start().python_frame(1, "dir\xff/train.py", "step\xe2\x82", 7).end_chunk();
  std::string path = test::temp_path("invalid-utf8.mtrace");
  test::write_file(path, b.bytes());
  std::string file, function;
  TraceReadSummary summary = read_trace(path, [&](const proto::Record& r) {
    if (r.has_python_frame()) {
      file = r.python_frame().file();
      function = r.python_frame().function();
      EXPECT_EQ(r.python_frame().line(), 7u);
    }
  });
  EXPECT_EQ(summary.records, 2u);
  EXPECT_EQ(summary.records_with_invalid_text, 1u);
  EXPECT_EQ(file, "dir?/train.py");
  EXPECT_EQ(function, "step??");
}

}  // namespace
}  // namespace memtrace
