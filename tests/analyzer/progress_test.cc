// The progress bar (util/progress.h) on a fake clock and a stringstream: its text, its first second of silence,
// its throttling and its clearing; and the reader's hook (read/read_progress.h): the chunks read, the passes
// named, the line cleared when a read throws, and nothing at all where the stream is not a terminal.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include "read/read_progress.h"
#include "read/trace_reader.h"
#include "trace_builder.h"
#include "util/progress.h"

namespace memtrace {
namespace {

constexpr int64_t kMs = 1'000'000;

// What end() writes after a line of `chars` characters.
std::string cleared(size_t chars) { return '\r' + std::string(chars, ' ') + '\r'; }

TEST(ProgressBar, LineSaysWhatHowFarAndOfHowMuch) {
  EXPECT_EQ(ProgressBar::line("reading train.mtrace", 4 << 20, 10 << 20),
            "memtrace: reading train.mtrace  40% (4.00 MiB of 10.00 MiB)");
  EXPECT_EQ(ProgressBar::line("reading a", 0, 512), "memtrace: reading a  0% (0 B of 512 B)");
  // 2.9 GiB read of 3 GiB: 96.66...%, rounded down (100% only when all is read).
  EXPECT_EQ(ProgressBar::line("reading a", 3113851290ull, 3ull << 30),
            "memtrace: reading a  96% (2.90 GiB of 3.00 GiB)");
  EXPECT_EQ(ProgressBar::line("reading a", 0, 0), "memtrace: reading a  100% (0 B of 0 B)");
  // No overflow in done * 100.
  EXPECT_EQ(ProgressBar::line("reading a", UINT64_MAX / 2, UINT64_MAX),
            "memtrace: reading a  49% (8192.00 PiB of 16384.00 PiB)");
}

TEST(ProgressBar, ANarrowTerminalKeepsTheFiguresAndCutsTheName) {
  // The whole line, "memtrace: reading train.mtrace  40% (4.00 MiB of 10.00 MiB)", is 59 bytes.
  const std::string whole = ProgressBar::line("reading train.mtrace", 4 << 20, 10 << 20);
  EXPECT_EQ(ProgressBar::fitted_line("reading train.mtrace", 4 << 20, 10 << 20, 0), whole);
  EXPECT_EQ(ProgressBar::fitted_line("reading train.mtrace", 4 << 20, 10 << 20, whole.size()), whole);
  // 40 bytes: the figures "  40% (4.00 MiB of 10.00 MiB)" are 29, so 11 of the name's part stay.
  EXPECT_EQ(ProgressBar::fitted_line("reading train.mtrace", 4 << 20, 10 << 20, 40),
            "memtrace: r  40% (4.00 MiB of 10.00 MiB)");
  // Narrower than the figures: the figures alone, cut.
  EXPECT_EQ(ProgressBar::fitted_line("reading train.mtrace", 4 << 20, 10 << 20, 12), "40% (4.00 Mi");
  // A name cut never splits a UTF-8 character: "é" is 2 bytes (0xC3 0xA9). The whole line is 33 bytes; in 32 the
  // name could keep 3 bytes, which would end inside the second "é", so it keeps 2.
  EXPECT_EQ(ProgressBar::fitted_line("\xC3\xA9\xC3\xA9", 0, 512, 33), "memtrace: \xC3\xA9\xC3\xA9  0% (0 B of 512 B)");
  EXPECT_EQ(ProgressBar::fitted_line("\xC3\xA9\xC3\xA9", 0, 512, 32), "memtrace: \xC3\xA9  0% (0 B of 512 B)");
}

TEST(ProgressBar, SilentForASecondThenAtMostTenRedrawsASecondThenCleared) {
  int64_t now = 0;
  std::ostringstream out;
  ProgressBar bar(out, [&] { return now; });
  bar.begin("reading a.mtrace", 10 << 20);
  now = 500 * kMs;
  bar.update(1 << 20);
  now = 999 * kMs;
  bar.update(2 << 20);
  EXPECT_EQ(out.str(), "");  // the first second: nothing
  now = 1000 * kMs;
  bar.update(4 << 20);
  const std::string first = "memtrace: reading a.mtrace  40% (4.00 MiB of 10.00 MiB)";
  EXPECT_EQ(out.str(), '\r' + first);
  now = 1099 * kMs;
  bar.update(5 << 20);
  EXPECT_EQ(out.str(), '\r' + first);  // 99 ms after the last redraw: none
  now = 1100 * kMs;
  bar.update(5 << 20);
  const std::string second = "memtrace: reading a.mtrace  50% (5.00 MiB of 10.00 MiB)";
  EXPECT_EQ(out.str(), '\r' + first + '\r' + second);
  now = 1300 * kMs;
  bar.update(11 << 20);  // more than the total: shown as the total
  const std::string third = "memtrace: reading a.mtrace  100% (10.00 MiB of 10.00 MiB)";
  EXPECT_EQ(out.str(), '\r' + first + '\r' + second + '\r' + third);
  out.str("");
  bar.end();
  EXPECT_EQ(out.str(), cleared(third.size()));
  out.str("");
  bar.end();  // nothing left to clear
  EXPECT_EQ(out.str(), "");
}

TEST(ProgressBar, AShorterLineBlanksTheRestOfTheLongerOne) {
  int64_t now = 2000 * kMs;  // made late: the delay is over from the start
  std::ostringstream out;
  ProgressBar bar(out, [&] { return now; });
  now += ProgressBar::kDelayNs;
  bar.begin("reading a", 2 << 20);
  bar.update((1 << 20) - 1);
  const std::string longer = "memtrace: reading a  49% (1024.00 KiB of 2.00 MiB)";
  now += 100 * kMs;
  bar.update(1 << 20);
  const std::string shorter = "memtrace: reading a  50% (1.00 MiB of 2.00 MiB)";
  ASSERT_EQ(longer.size() - shorter.size(), 3u);
  EXPECT_EQ(out.str(), '\r' + longer + '\r' + shorter + "   ");
}

TEST(ProgressBar, APieceThatDrewNothingClearsNothingAndTheNextDrawsAtOnce) {
  int64_t now = 0;
  std::ostringstream out;
  ProgressBar bar(out, [&] { return now; });
  bar.begin("reading a", 100);
  now = 300 * kMs;
  bar.update(100);
  bar.end();
  EXPECT_EQ(out.str(), "");
  now = 1500 * kMs;
  bar.begin("reading a, pass 2", 100);
  bar.update(10);
  now = 1550 * kMs;
  bar.begin("reading b", 100);  // ends pass 2 (cleared), and draws within 100 ms of its last line
  bar.update(20);
  const std::string pass2 = "memtrace: reading a, pass 2  10% (10 B of 100 B)";
  EXPECT_EQ(out.str(), '\r' + pass2 + cleared(pass2.size()) + "\rmemtrace: reading b  20% (20 B of 100 B)");
}

// Output to the bar's terminal (stdout) clears the bar first; the bar comes back at its next update, below it.
TEST(ClearsProgressBar, OtherOutputClearsTheBarWhichComesBackBelowIt) {
  int64_t now = 0;
  std::ostringstream terminal, printed;
  ProgressBar bar(terminal, [&] { return now; });
  ClearsProgressBar clearing(printed.rdbuf(), bar);
  std::ostream out(&clearing);
  bar.begin("reading a", 100);
  out << "row 1\n";  // nothing drawn yet: nothing to clear
  EXPECT_EQ(terminal.str(), "");
  now = 1000 * kMs;
  bar.update(40);
  const std::string line = "memtrace: reading a  40% (40 B of 100 B)";
  out << "row " << 2 << '\n';
  out << "row 3\n";  // cleared once: the line is empty after the first write
  now = 1050 * kMs;
  bar.update(50);  // throttled: 50 ms after the last drawing
  now = 1100 * kMs;
  bar.update(60);
  EXPECT_EQ(printed.str(), "row 1\nrow 2\nrow 3\n");
  EXPECT_EQ(terminal.str(), '\r' + line + cleared(line.size()) + "\rmemtrace: reading a  60% (60 B of 100 B)");
}

TEST(ReadProgressBar, NamesTheFileAndItsPass) {
  EXPECT_EQ(ReadProgressBar::what("/data/runs/train.mtrace", 1), "reading train.mtrace");
  EXPECT_EQ(ReadProgressBar::what("train.mtrace", 3), "reading train.mtrace, pass 3");
  // Terminal-safe, and cut to its last 40 characters.
  EXPECT_EQ(ReadProgressBar::what("dir/a\x1b]0;x\x07.mtrace", 1), "reading a\\x1b]0;x\\x07.mtrace");
  EXPECT_EQ(ReadProgressBar::what(std::string(50, 'a') + "-end.mtrace", 1),
            "reading ..." + std::string(26, 'a') + "-end.mtrace");
  // Never half a UTF-8 character: "é" is 2 bytes, and of the 41 the last 37 begin with its second.
  EXPECT_EQ(ReadProgressBar::what("abc\xc3\xa9" + std::string(36, 'b'), 1), "reading ..." + std::string(36, 'b'));
}

// Three chunks; `now` moves on 600 ms at every read of the clock (the bar's construction, then once per chunk).
TEST(ReadProgressBar, TheReaderReportsEveryChunkAndEveryPass) {
  test::TraceBuilder b;
  b.start().event(test::driver_alloc(0, 0xA000, 100)).end_chunk();
  b.event(test::driver_alloc(0, 0xB000, 200)).end_chunk();
  b.event(test::driver_free(0, 0xA000)).end_chunk();
  const std::string path = test::temp_path("progress.mtrace");
  test::write_file(path, b.bytes());
  const uint64_t size = b.bytes().size(), after_second = b.chunk_offsets()[2];

  int64_t now = 0;
  std::ostringstream out;
  ReadProgressBar bar(out, [&] {
    int64_t t = now;
    now += 600 * kMs;
    return t;
  });
  ReadProgress* previous = set_read_progress(&bar);
  read_trace(path, [](const proto::Record&) {});
  // Chunk 1 at 0.6 s: nothing; chunk 2 at 1.2 s and chunk 3 at 1.8 s drawn; cleared at the end.
  const std::string second = ProgressBar::line("reading progress.mtrace", after_second, size);
  const std::string third = ProgressBar::line("reading progress.mtrace", size, size);
  EXPECT_EQ(out.str(), '\r' + second + '\r' + third + cleared(third.size()));
  out.str("");
  read_trace(path, [](const proto::Record&) {});
  const std::string pass2 = ProgressBar::line("reading progress.mtrace, pass 2", after_second, size);
  const std::string pass2_end = ProgressBar::line("reading progress.mtrace, pass 2", size, size);
  // Every chunk of the second pass is past the delay; chunk 1 is the pass's first line.
  const std::string pass2_first = ProgressBar::line("reading progress.mtrace, pass 2", b.chunk_offsets()[1], size);
  EXPECT_EQ(out.str(), '\r' + pass2_first + '\r' + pass2 + '\r' + pass2_end + cleared(pass2_end.size()));
  set_read_progress(previous);
}

TEST(ReadProgressBar, AReadThatThrowsClearsItsLine) {
  test::TraceBuilder b;
  b.start().event(test::driver_alloc(0, 0xA000, 100)).end_chunk();
  std::string bytes = b.bytes() + test::compress_frame(std::string(1, 5) + "abc");  // 5 bytes said, 3 there
  const std::string path = test::temp_path("progress-damaged.mtrace");
  test::write_file(path, bytes);
  int64_t now = 0;
  std::ostringstream out;
  ReadProgressBar bar(out, [&] { return now; });
  now = 5000 * kMs;
  ReadProgress* previous = set_read_progress(&bar);
  EXPECT_THROW(read_trace(path, [](const proto::Record&) {}), TraceError);
  set_read_progress(previous);
  const std::string first = ProgressBar::line("reading progress-damaged.mtrace", b.bytes().size(), bytes.size());
  EXPECT_EQ(out.str(), '\r' + first + cleared(first.size()));
}

TEST(TerminalReadProgress, NothingWhereTheStreamIsNotATerminal) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::ostringstream out;
  {
    std::ostringstream printed;
    std::streambuf* printed_buffer = static_cast<std::ostream&>(printed).rdbuf();
    TerminalReadProgress progress(pipe_fds[1], out, pipe_fds[1], printed, [] { return int64_t(60'000) * kMs; });
    EXPECT_FALSE(progress.active());
    EXPECT_EQ(static_cast<std::ostream&>(printed).rdbuf(), printed_buffer);
    EXPECT_EQ(read_progress(), nullptr);
    read_trace(MEMTRACE_EXAMPLE_OOM_TRACE, [](const proto::Record&) {});
  }
  EXPECT_EQ(out.str(), "");
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST(TerminalReadProgress, InstalledWhileItLivesWhereTheStreamIsATerminal) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) GTEST_SKIP() << "no pseudo-terminal here";
  int terminal = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(terminal, 0);
  std::ostringstream out, printed;
  std::streambuf* printed_buffer = static_cast<std::ostream&>(printed).rdbuf();
  int64_t now = 0;
  {
    // Both streams on the terminal: what is printed during a read goes through a ClearsProgressBar.
    TerminalReadProgress progress(terminal, out, terminal, printed, [&] { return now; });
    EXPECT_TRUE(progress.active());
    EXPECT_NE(read_progress(), nullptr);
    EXPECT_NE(static_cast<std::ostream&>(printed).rdbuf(), printed_buffer);
    now = 2000 * kMs;
    read_trace(MEMTRACE_EXAMPLE_OOM_TRACE, [&](const proto::Record& r) {
      if (r.has_end()) printed << "the end\n";
    });
  }
  EXPECT_EQ(read_progress(), nullptr);
  EXPECT_EQ(static_cast<std::ostream&>(printed).rdbuf(), printed_buffer);
  EXPECT_EQ(printed.str(), "the end\n");
  EXPECT_EQ(out.str().substr(0, 36), "\rmemtrace: reading torch_oom.mtrace ");
  EXPECT_EQ(out.str().back(), '\r');  // cleared
  ::close(terminal);
  ::close(master);
}

}  // namespace
}  // namespace memtrace
