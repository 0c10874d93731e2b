// fleet/combined_timeline.h: the exact sum of several processes' totals on one GPU on the wall clock, its peaks
// with every process's share, the order of equal times, the thinned series, and the errors that name the file.
// Every figure below is worked out by hand from the traces built here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fleet/combined_timeline.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::driver_free;
using test::torch_event;

// Wall-clock time zero of the scenario: process A's start; process B starts 500 ns later.
constexpr uint64_t kT0 = 1'700'000'000'000'000'000;

// The TraceStart of process `pid` on `host`, its time zero at `start_unix_ns` on the wall clock.
proto::Record start_record(uint32_t pid, const std::string& host, uint64_t start_unix_ns) {
  proto::Record r;
  r.mutable_start()->set_pid(pid);
  r.mutable_start()->set_hostname(host);
  r.mutable_start()->set_start_monotonic_ns(1'000'000'000);
  r.mutable_start()->set_start_unix_ns(start_unix_ns);
  return r;
}

// The Device record of `ordinal`: the GPU whose UUID is the 16 bytes first, first + 1, ... (nvidia-smi's
// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx).
proto::Record device_record(uint32_t ordinal, uint8_t first) {
  proto::Record r;
  r.mutable_device()->set_ordinal(ordinal);
  std::string uuid;
  for (uint8_t i = 0; i < 16; ++i) uuid.push_back(char(first + i));
  r.mutable_device()->set_uuid(uuid);
  return r;
}

std::string write_trace(const std::string& name, const test::TraceBuilder& b) {
  std::string path = test::temp_path(name + ".mtrace");
  test::write_file(path, b.bytes());
  return path;
}

// Process A (pid 100 on node1), on ordinal 0, the GPU whose UUID bytes are 0x00..0x0f, driver level only
// (allocated = reserved = its cudaMalloc'd bytes), start kT0:
//   wall +1000  alloc 400  -> A 400      wall +3000  free 600   -> A 400
//   wall +2000  alloc 600  -> A 1000     wall +5000  free 400   -> A 0
// Its own peak: 1000 at +2000.
std::string process_a(const std::string& name) {
  test::TraceBuilder b;
  b.record(start_record(100, "node1", kT0)).record(device_record(0, 0x00));
  b.event(driver_alloc(0, 0xA000, 400, 1000));
  b.event(driver_alloc(0, 0xB000, 600, 1000));
  b.event(driver_free(0, 0xB000, 1000));
  b.event(driver_free(0, 0xA000, 2000));
  b.end_chunk();
  return write_trace(name + "-a", b);
}

// Process B (pid 200 on node1), a PyTorch process using the same GPU as its ordinal 1 (start kT0 + 500), with
// 5000 B of its own on ordinal 0 (another GPU: UUID bytes 0x10..0x1f) that the combination must not count. On ordinal
// 1, allocated is PyTorch's blocks and reserved PyTorch's reserved total (both layers seen), so its 2048 B segment
// alone changes neither:
//   wall +1200  segment 2048                  (0, 0): no change
//   wall +1500  block 300   (PyTorch: 300, 2048) -> B (300, 2048)
//   wall +3500  block 1000  (1300, 2048)         -> B (1300, 2048)
//   wall +4000  5000 B on ordinal 0              (another GPU)
//   wall +6000  block 200   (1500, 2048)         -> B (1500, 2048)   its own peak allocated
//   wall +7000  free 1000   (500, 2048)          -> B (500, 2048)
std::string process_b(const std::string& name) {
  test::TraceBuilder b;
  b.record(start_record(200, "node1", kT0 + 500)).record(device_record(0, 0x10)).record(device_record(1, 0x00));
  b.event(driver_alloc(1, 0xC0000, 2048, 700));
  b.event(torch_event(proto::ALLOC, 1, 0xC0000, 300, 300, 2048, 300));
  b.event(torch_event(proto::ALLOC, 1, 0xC0200, 1000, 1300, 2048, 2000));
  b.event(driver_alloc(0, 0xF0000, 5000, 500));
  b.event(torch_event(proto::ALLOC, 1, 0xC0600, 200, 1500, 2048, 2000));
  b.event(torch_event(proto::FREE, 1, 0xC0200, 1000, 500, 2048, 1000));
  b.end_chunk();
  return write_trace(name + "-b", b);
}

// The combined series of A (ordinal 0) and B (ordinal 1), every change:
//   wall   who  A alloc/res   B alloc/res    sum allocated  sum reserved
//   +1000  A    400/400       0/0            400            400
//   +1500  B    400/400       300/2048       700            2448
//   +2000  A    1000/1000     300/2048       1300           3048   <- peak reserved (A's own peak)
//   +3000  A    400/400       300/2048       700            2448
//   +3500  B    400/400       1300/2048      1700           2448   <- peak allocated: neither's own peak
//   +5000  A    0/0           1300/2048      1300           2048
//   +6000  B    0/0           1500/2048      1500           2048   (B's own peak allocated)
//   +7000  B    0/0           500/2048       500            2048
const std::vector<CombinedMoment> kEveryChange = {
    {kT0 + 1000, 400, 400, {400, 0}, {400, 0}},          {kT0 + 1500, 700, 2448, {400, 300}, {400, 2048}},
    {kT0 + 2000, 1300, 3048, {1000, 300}, {1000, 2048}}, {kT0 + 3000, 700, 2448, {400, 300}, {400, 2048}},
    {kT0 + 3500, 1700, 2448, {400, 1300}, {400, 2048}},  {kT0 + 5000, 1300, 2048, {0, 1300}, {0, 2048}},
    {kT0 + 6000, 1500, 2048, {0, 1500}, {0, 2048}},      {kT0 + 7000, 500, 2048, {0, 500}, {0, 2048}},
};

std::vector<CombinedMember> scenario(const std::string& name) { return {{process_a(name), 0}, {process_b(name), 1}}; }

TEST(CombinedTimeline, ThePeakOfTheSumIsWhereNeitherProcessPeaks) {
  CombinedTimeline t = combine_timelines(scenario("peak"), 100);
  EXPECT_EQ(t.peak_allocated, (CombinedMoment{kT0 + 3500, 1700, 2448, {400, 1300}, {400, 2048}}));
  EXPECT_EQ(t.peak_reserved, (CombinedMoment{kT0 + 2000, 1300, 3048, {1000, 300}, {1000, 2048}}));
  EXPECT_EQ(t.changes, 8u);
  EXPECT_EQ(t.points, kEveryChange);
}

TEST(CombinedTimeline, TheSeriesStreamsInWallClockOrderWithTheMemberOfEachChange) {
  CombinedSeries series(scenario("stream"));
  EXPECT_EQ(series.changes(), 8u);
  EXPECT_EQ(series.first_unix_ns(), kT0 + 1000);
  EXPECT_EQ(series.last_unix_ns(), kT0 + 7000);
  ASSERT_EQ(series.reads().size(), 2u);
  EXPECT_FALSE(series.reads()[1].truncated);
  std::vector<size_t> members;
  std::vector<CombinedMoment> rows;
  auto peaks = series.merge([&](const CombinedChange& c) {
    members.push_back(c.member);
    rows.push_back(CombinedMoment{c.unix_ns,
                                  c.allocated_bytes,
                                  c.reserved_bytes,
                                  {c.member_allocated_bytes.begin(), c.member_allocated_bytes.end()},
                                  {c.member_reserved_bytes.begin(), c.member_reserved_bytes.end()}});
  });
  EXPECT_EQ(members, (std::vector<size_t>{0, 1, 0, 0, 1, 0, 1, 1}));
  EXPECT_EQ(rows, kEveryChange);
  EXPECT_EQ(peaks.first.unix_ns, kT0 + 3500);
  // A second merge reads the spill again and gives the same.
  std::vector<CombinedMoment> again;
  series.merge([&](const CombinedChange& c) {
    again.push_back(CombinedMoment{c.unix_ns,
                                   c.allocated_bytes,
                                   c.reserved_bytes,
                                   {c.member_allocated_bytes.begin(), c.member_allocated_bytes.end()},
                                   {c.member_reserved_bytes.begin(), c.member_reserved_bytes.end()}});
  });
  EXPECT_EQ(again, kEveryChange);
}

// Thinned to 3 points: the 6000 ns from the first change (+1000) to the last (+7000) in intervals of
// 6000 / 3 + 1 = 2001 ns: [+1000, +3001) holds +1000..+3000, [+3001, +5002) +3500 and +5000, [+5002, +7003)
// +6000 and +7000. Each row is at its interval's last change with its maxima: the combined peak allocated
// (1700 at +3500) survives in the second, the peak reserved (3048 at +2000) in the first.
TEST(CombinedTimeline, AThinnedSeriesKeepsThePeaks) {
  CombinedTimeline t = combine_timelines(scenario("thinned"), 3);
  EXPECT_EQ(t.changes, 8u);
  EXPECT_EQ(t.points, (std::vector<CombinedMoment>{{kT0 + 3000, 1300, 3048, {}, {}},
                                                   {kT0 + 5000, 1700, 2448, {}, {}},
                                                   {kT0 + 7000, 1500, 2048, {}, {}}}));
  EXPECT_EQ(t.peak_allocated.allocated_bytes, 1700u);  // the peaks are exact, whatever the thinning
  EXPECT_EQ(t.peak_allocated.member_allocated_bytes, (std::vector<uint64_t>{400, 1300}));
  // Exactly as many changes as points: every change, with the shares.
  EXPECT_EQ(combine_timelines(scenario("thinned-8"), 8).points, kEveryChange);
}

TEST(CombinedTimeline, OneMemberIsItsOwnTimeline) {
  CombinedTimeline t = combine_timelines({{process_a("alone"), 0}}, 100);
  EXPECT_EQ(t.peak_allocated, (CombinedMoment{kT0 + 2000, 1000, 1000, {1000}, {1000}}));
  EXPECT_EQ(t.peak_reserved, t.peak_allocated);
  EXPECT_EQ(t.points, (std::vector<CombinedMoment>{{kT0 + 1000, 400, 400, {400}, {400}},
                                                   {kT0 + 2000, 1000, 1000, {1000}, {1000}},
                                                   {kT0 + 3000, 400, 400, {400}, {400}},
                                                   {kT0 + 5000, 0, 0, {0}, {0}}}));
}

// Equal wall-clock times: P allocates 100 B at S+1000 and 50 B, then 70 B more at S+2000 (the same ns), then frees
// the 100 B at S+3000; Q (start S+2000) allocates 100 B at its 1000 ns, S+3000, the moment P frees. Member order
// breaks the tie at S+3000, and P's two changes at S+2000 keep their file order.
constexpr uint64_t kS = 1'000'000'000'000;

std::vector<CombinedMember> equal_times(const std::string& name, bool p_first) {
  test::TraceBuilder p;
  p.start(1'000'000'000, kS);
  p.event(driver_alloc(0, 0x1000, 100, 1000));
  p.event(driver_alloc(0, 0x2000, 50, 1000));
  p.event(driver_alloc(0, 0x3000, 70, 0));
  p.event(driver_free(0, 0x1000, 1000));
  p.end_chunk();
  test::TraceBuilder q;
  q.start(1'000'000'000, kS + 2000);
  q.event(driver_alloc(0, 0x1000, 100, 1000));
  q.end_chunk();
  CombinedMember pm{write_trace(name + "-p", p), 0}, qm{write_trace(name + "-q", q), 0};
  return p_first ? std::vector<CombinedMember>{pm, qm} : std::vector<CombinedMember>{qm, pm};
}

TEST(CombinedTimeline, EqualTimesGoInMemberOrderThenFileOrder) {
  // P first: +1000 100; +2000 150, 220; +3000 P frees (120), then Q allocates (220). The peak, 220, is first
  // reached at +2000.
  CombinedTimeline t = combine_timelines(equal_times("p-first", true), 100);
  EXPECT_EQ(t.points, (std::vector<CombinedMoment>{{kS + 1000, 100, 100, {100, 0}, {100, 0}},
                                                   {kS + 2000, 150, 150, {150, 0}, {150, 0}},
                                                   {kS + 2000, 220, 220, {220, 0}, {220, 0}},
                                                   {kS + 3000, 120, 120, {120, 0}, {120, 0}},
                                                   {kS + 3000, 220, 220, {120, 100}, {120, 100}}}));
  EXPECT_EQ(t.peak_allocated, (CombinedMoment{kS + 2000, 220, 220, {220, 0}, {220, 0}}));
  // Q first: at +3000 Q allocates before P frees: 320 for an instant, the peak, with both shares.
  t = combine_timelines(equal_times("q-first", false), 100);
  EXPECT_EQ(t.points[3], (CombinedMoment{kS + 3000, 320, 320, {100, 220}, {100, 220}}));
  EXPECT_EQ(t.points[4], (CombinedMoment{kS + 3000, 220, 220, {100, 120}, {100, 120}}));
  EXPECT_EQ(t.peak_allocated, (CombinedMoment{kS + 3000, 320, 320, {100, 220}, {100, 220}}));
}

// A member without a change on its ordinal adds nothing, and the peaks of a GPU nobody used are zero.
TEST(CombinedTimeline, AMemberWithoutChangesAddsNothing) {
  std::vector<CombinedMember> members = scenario("idle");
  members[1].ordinal = 2;  // B never used an ordinal 2
  CombinedTimeline t = combine_timelines(members, 100);
  EXPECT_EQ(t.changes, 4u);
  EXPECT_EQ(t.peak_allocated, (CombinedMoment{kT0 + 2000, 1000, 1000, {1000, 0}, {1000, 0}}));
  members[0].ordinal = 2;
  t = combine_timelines(members, 100);
  EXPECT_EQ(t.changes, 0u);
  EXPECT_TRUE(t.points.empty());
  EXPECT_EQ(t.peak_allocated, (CombinedMoment{0, 0, 0, {0, 0}, {0, 0}}));
}

// Totals beyond 2^64 together (a hostile file): the sum is held in 128 bits and shown as UINT64_MAX, the
// members' own figures exact.
TEST(CombinedTimeline, ASumBeyondUint64IsSaturated) {
  const uint64_t huge = uint64_t(1) << 63;
  test::TraceBuilder p, q;
  p.start(1'000'000'000, kS).event(driver_alloc(0, 0x1000, huge, 1000)).end_chunk();
  q.start(1'000'000'000, kS).event(driver_alloc(0, 0x1000, huge, 2000)).end_chunk();
  CombinedTimeline t = combine_timelines({{write_trace("huge-p", p), 0}, {write_trace("huge-q", q), 0}}, 100);
  ASSERT_EQ(t.points.size(), 2u);
  EXPECT_EQ(t.points[1], (CombinedMoment{kS + 2000, UINT64_MAX, UINT64_MAX, {huge, huge}, {huge, huge}}));
  EXPECT_EQ(t.peak_allocated.unix_ns, kS + 2000);
}

// A trace that cannot be put on the wall clock, or does not read, is an error naming the file.
TEST(CombinedTimeline, ATraceWithoutAWallClockStartIsAnErrorNamingIt) {
  std::string good = process_a("errors");
  test::TraceBuilder no_start;
  no_start.event(driver_alloc(0, 0x1000, 100, 1000)).end_chunk();
  std::string no_start_path = write_trace("no-start", no_start);
  try {
    combine_timelines({{good, 0}, {no_start_path, 0}}, 100);
    FAIL() << "no error";
  } catch (const CombinedTraceError& e) {
    EXPECT_EQ(e.trace(), no_start_path);
    EXPECT_EQ(std::string(e.what()),
              "no TraceStart record: its events cannot be put on the wall clock to combine them with other "
              "processes'");
    EXPECT_FALSE(e.has_byte_offset());
  }
  test::TraceBuilder zero;
  zero.start(1'000'000'000, 0).event(driver_alloc(0, 0x1000, 100, 1000)).end_chunk();
  std::string zero_path = write_trace("zero-start", zero);
  try {
    combine_timelines({{zero_path, 0}, {good, 0}}, 100);
    FAIL() << "no error";
  } catch (const CombinedTraceError& e) {
    EXPECT_EQ(e.trace(), zero_path);
    EXPECT_EQ(std::string(e.what()),
              "its TraceStart has no start_unix_ns (CLOCK_REALTIME): its events cannot be put on the wall clock to "
              "combine them with other processes'");
  }
  std::string not_a_trace = test::temp_path("combined-not-a-trace.mtrace");
  test::write_file(not_a_trace, "this is not a trace");
  try {
    combine_timelines({{good, 0}, {not_a_trace, 0}}, 100);
    FAIL() << "no error";
  } catch (const CombinedTraceError& e) {
    EXPECT_EQ(e.trace(), not_a_trace);
  }
}

// ---- `memtrace timeline A B ...`: the combined rows of each GPU ----

const std::string kGpuX = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f";  // A's ordinal 0, B's ordinal 1
const std::string kGpuY = "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f";  // B's ordinal 0

// Every change of kEveryChange on GPU X (A: pid 100, B: pid 200), then GPU Y, which only B used: 5000 B at +4000.
const std::string kCsvHeader =
    "time_unix_s,gpu,allocated_bytes,reserved_bytes,pid_100_allocated_bytes,"
    "pid_200_allocated_bytes\n";

TEST(CombinedTimelineCli, CsvRowsPerGpuWithAColumnPerProcess) {
  std::vector<CombinedMember> m = scenario("cli-csv");
  test::MemtraceRun r = test::run_memtrace_binary("timeline " + m[0].trace + " " + m[1].trace + " --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, kCsvHeader + "1700000000.000001000," + kGpuX +
                       ",400,400,400,0\n"
                       "1700000000.000001500," +
                       kGpuX +
                       ",700,2448,400,300\n"
                       "1700000000.000002000," +
                       kGpuX +
                       ",1300,3048,1000,300\n"
                       "1700000000.000003000," +
                       kGpuX +
                       ",700,2448,400,300\n"
                       "1700000000.000003500," +
                       kGpuX +
                       ",1700,2448,400,1300\n"
                       "1700000000.000005000," +
                       kGpuX +
                       ",1300,2048,0,1300\n"
                       "1700000000.000006000," +
                       kGpuX +
                       ",1500,2048,0,1500\n"
                       "1700000000.000007000," +
                       kGpuX +
                       ",500,2048,0,500\n"
                       "1700000000.000004000," +
                       kGpuY + ",5000,5000,,5000\n");
}

// Intervals of 2000 ns from the epoch (kT0 is a multiple): [+0, +2000) holds +1000 and +1500, [+2000, +4000)
// +2000, +3000 and +3500, [+4000, +6000) +5000 (and Y's +4000), [+6000, +8000) +6000 and +7000. Each row is at
// its interval's last change, every figure the highest it reached there: the peaks (1700 allocated, 3048
// reserved, A's 1000 and B's 1500) all stay.
TEST(CombinedTimelineCli, AnIntervalKeepsEachFiguresHighest) {
  std::vector<CombinedMember> m = scenario("cli-interval");
  test::MemtraceRun r =
      test::run_memtrace_binary("timeline " + m[0].trace + " " + m[1].trace + " --csv --interval 0.000002");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kCsvHeader + "1700000000.000001500," + kGpuX +
                       ",700,2448,400,300\n"
                       "1700000000.000003500," +
                       kGpuX +
                       ",1700,3048,1000,1300\n"
                       "1700000000.000005000," +
                       kGpuX +
                       ",1300,2048,0,1300\n"
                       "1700000000.000007000," +
                       kGpuX +
                       ",1500,2048,0,1500\n"
                       "1700000000.000004000," +
                       kGpuY + ",5000,5000,,5000\n");
}

TEST(CombinedTimelineCli, JsonHasEachGpusRowsAndPeaks) {
  std::vector<CombinedMember> m = scenario("cli-json");
  test::MemtraceRun r = test::run_memtrace_binary("timeline --json " + m[0].trace + " " + m[1].trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 2u);
  const nlohmann::json& x = j["gpus"][0];
  EXPECT_EQ(x["gpu"], kGpuX);
  EXPECT_EQ(x["processes"], nlohmann::json::parse(R"([{"trace": ")" + m[0].trace +
                                                  R"(", "pid": 100, "host": "node1", "ordinal": 0},
                                                  {"trace": ")" +
                                                  m[1].trace + R"(", "pid": 200, "host": "node1", "ordinal": 1}])"));
  ASSERT_EQ(x["rows"].size(), 8u);
  EXPECT_EQ(x["rows"][4], nlohmann::json::parse(R"({"unix_ns": 1700000000000003500, "allocated_bytes": 1700,
                                                  "reserved_bytes": 2448, "process_allocated_bytes": [400, 1300]})"));
  EXPECT_EQ(x["peak_allocated"],
            nlohmann::json::parse(R"({"unix_ns": 1700000000000003500, "allocated_bytes": 1700, "reserved_bytes": 2448,
                                      "process_allocated_bytes": [400, 1300], "process_reserved_bytes": [400, 2048]})"));
  EXPECT_EQ(x["peak_reserved"],
            nlohmann::json::parse(R"({"unix_ns": 1700000000000002000, "allocated_bytes": 1300, "reserved_bytes": 3048,
                                      "process_allocated_bytes": [1000, 300],
                                      "process_reserved_bytes": [1000, 2048]})"));
  EXPECT_EQ(j["gpus"][1]["gpu"], kGpuY);
  EXPECT_EQ(j["gpus"][1]["rows"].size(), 1u);
  EXPECT_EQ(j["traces"][1]["truncated"], false);
}

// A directory is every trace in it, by name; one trace, by itself or alone in a directory, is the one-trace
// timeline as it always was.
TEST(CombinedTimelineCli, ADirectoryIsItsTracesAndOneTraceIsUnchanged) {
  namespace fs = std::filesystem;
  std::vector<CombinedMember> m = scenario("cli-dir");
  fs::path dir = test::temp_path("combined-cli-dir"), alone = test::temp_path("combined-cli-alone");
  fs::remove_all(dir);
  fs::remove_all(alone);
  fs::create_directories(dir);
  fs::create_directories(alone);
  fs::copy_file(m[0].trace, dir / "a.mtrace");
  fs::copy_file(m[1].trace, dir / "b.mtrace");
  fs::copy_file(m[0].trace, alone / "a.mtrace");
  std::string both = test::memtrace_stdout("timeline " + m[0].trace + " " + m[1].trace + " --csv");
  EXPECT_EQ(test::memtrace_stdout("timeline " + dir.string() + "/ --csv"), both);
  std::string one = test::memtrace_stdout("timeline " + m[0].trace + " --csv");
  EXPECT_EQ(one.substr(0, one.find('\n')),
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes");
  EXPECT_EQ(test::memtrace_stdout("timeline " + alone.string() + " --csv"), one);
}

// Without UUIDs (Device records), a GPU is its host and ordinal: P and Q share node h1's cuda:0, R (node h2,
// the same pid as P) has its own. Each at +1000, +2000 and +1500 from kT0 allocates 100, 200 and 300 B. A
// process's column is 0 on its GPU before it allocates, and empty on a GPU it never used.
TEST(CombinedTimelineCli, WithoutUuidsAGpuIsItsHostAndOrdinal) {
  auto trace = [](const std::string& name, uint32_t pid, const std::string& host, int64_t delta_ns, uint64_t bytes) {
    test::TraceBuilder b;
    b.record(start_record(pid, host, kT0)).event(driver_alloc(0, 0x1000, bytes, delta_ns)).end_chunk();
    return write_trace(name, b);
  };
  std::string p = trace("cli-p", 7, "h1", 1000, 100), q = trace("cli-q", 8, "h1", 2000, 200),
              r = trace("cli-r", 7, "h2", 1500, 300);
  test::MemtraceRun run = test::run_memtrace_binary("timeline " + p + " " + q + " " + r + " --csv");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "time_unix_s,gpu,allocated_bytes,reserved_bytes,pid_7_allocated_bytes,pid_8_allocated_bytes,"
            "pid_7_2_allocated_bytes\n"
            "1700000000.000001000,h1/cuda:0,100,100,100,0,\n"
            "1700000000.000002000,h1/cuda:0,300,300,100,200,\n"
            "1700000000.000001500,h2/cuda:0,300,300,,,300\n");
}

// A host name is the traced program's bytes: in CSV its control characters are written out (terminal_safe) and a
// comma quotes the field; JSON keeps it exact.
TEST(CombinedTimelineCli, AHostileHostNameStaysOneField) {
  auto trace = [](const std::string& name, uint32_t pid) {
    test::TraceBuilder b;
    b.record(start_record(pid, "evil,\x1b[2J", kT0)).event(driver_alloc(0, 0x1000, 64, 1000)).end_chunk();
    return write_trace(name, b);
  };
  std::string p = trace("cli-evil-p", 1), q = trace("cli-evil-q", 2);
  test::MemtraceRun run = test::run_memtrace_binary("timeline " + p + " " + q + " --csv");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "time_unix_s,gpu,allocated_bytes,reserved_bytes,pid_1_allocated_bytes,pid_2_allocated_bytes\n"
            "1700000000.000001000,\"evil,\\x1b[2J/cuda:0\",64,64,64,0\n"
            "1700000000.000001000,\"evil,\\x1b[2J/cuda:0\",128,128,64,64\n");
  run = test::run_memtrace_binary("timeline " + p + " " + q + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["gpus"][0]["gpu"], "evil,\x1b[2J/cuda:0");
}

// A trace among several that has no wall-clock start, or does not read: one line naming it, exit 2, no rows.
TEST(CombinedTimelineCli, ATraceThatCannotBeCombinedIsNamed) {
  std::vector<CombinedMember> m = scenario("cli-bad");
  test::TraceBuilder zero;
  zero.start(1'000'000'000, 0).event(driver_alloc(0, 0x1000, 100, 1000)).end_chunk();
  std::string zero_path = write_trace("cli-zero-start", zero);
  test::MemtraceRun r = test::run_memtrace_binary("timeline " + m[0].trace + " " + zero_path + " --csv");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "memtrace: " + zero_path +
                       ": no wall-clock start (TraceStart.start_unix_ns): its events cannot be put on the wall clock "
                       "to combine them with other processes'\n");
  std::string not_a_trace = test::temp_path("cli-not-a-trace.mtrace");
  test::write_file(not_a_trace, "this is not a trace");
  r = test::run_memtrace_binary("timeline " + m[0].trace + " " + not_a_trace + " --json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("memtrace: " + not_a_trace + ": ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

}  // namespace
}  // namespace memtrace
