// `memtrace export --format perfetto` (export/perfetto.h): the output decoded with export/perfetto_trace.proto and
// checked packet by packet, on the traces of export_traces.h and on hostile ones.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "attach_traces.h"
#include "cli/report_session.h"
#include "export/perfetto.h"
#include "export_traces.h"
#include "perfetto_trace.pb.h"
#include "stacks/symbolizer.h"

namespace memtrace {
namespace {

namespace pf = perfetto_proto;
using test::kGiB;
using test::kMiB;
using test::TraceBuilder;

// The export of the trace `bytes`, decoded.
pf::Trace export_perfetto(const std::string& bytes, const std::string& name, const PerfettoOptions& options = {}) {
  const std::string path = test::temp_path(name);
  test::write_file(path, bytes);
  std::unique_ptr<Analysis> analysis = analyze_trace(path, true);
  Symbolizer symbolizer(analysis->stacks.modules(), {});
  FrameResolver resolver(analysis->stacks, symbolizer);
  ExportSource source(*analysis, resolver, [&] { return event_phases_of(*analysis, resolver); });
  std::ostringstream out;
  write_perfetto(source, out, options);
  pf::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(out.str()));
  return trace;
}

const char* type_name(pf::TrackEvent::Type type) {
  switch (type) {
    case pf::TrackEvent::TYPE_SLICE_BEGIN: return "begin";
    case pf::TrackEvent::TYPE_SLICE_END: return "end";
    case pf::TrackEvent::TYPE_INSTANT: return "instant";
    case pf::TrackEvent::TYPE_COUNTER: return "counter";
    default: return "?";
  }
}

// One line per packet: "track UUID 'NAME' in PARENT [bytes]", "track 1 process PID [ARGS] 'NAME'", or
// "@TIME TRACK TYPE ['NAME'] [= VALUE] [KEY=VALUE...]".
std::string describe(const pf::TracePacket& p) {
  std::ostringstream s;
  if (p.has_track_descriptor()) {
    const pf::TrackDescriptor& t = p.track_descriptor();
    s << "track " << t.uuid();
    if (t.has_process()) {
      s << " process " << t.process().pid() << " [";
      for (int i = 0; i < t.process().cmdline_size(); ++i) s << (i ? " " : "") << t.process().cmdline(i);
      s << "] '" << t.process().process_name() << "'";
    }
    if (t.has_name()) s << " '" << t.name() << "'";
    if (t.has_parent_uuid()) s << " in " << t.parent_uuid();
    if (t.has_counter()) s << (t.counter().unit() == pf::CounterDescriptor::UNIT_SIZE_BYTES ? " bytes" : " ?");
    return s.str();
  }
  const pf::TrackEvent& e = p.track_event();
  s << '@' << p.timestamp() << ' ' << e.track_uuid() << ' ' << type_name(e.type());
  if (e.has_name()) s << " '" << e.name() << "'";
  if (e.has_counter_value()) s << " = " << e.counter_value();
  for (const pf::DebugAnnotation& a : e.debug_annotations())
    s << ' ' << a.name() << '=' << (a.has_uint_value() ? std::to_string(a.uint_value()) : a.string_value());
  return s.str();
}

std::vector<std::string> describe(const pf::Trace& trace) {
  std::vector<std::string> lines;
  for (const pf::TracePacket& p : trace.packet()) lines.push_back(describe(p));
  return lines;
}

TEST(PerfettoExport, CountersOomsIterationsAndNvtxRanges) {
  pf::Trace trace = export_perfetto(test::perfetto_export_trace(), "perfetto.mtrace");
  const std::vector<std::string> expected = {
      "track 1 process 4242 [python train.py] 'python train.py'",
      "track 2 'cuda:0 OOMs' in 1",
      "@10000 2 instant 'OOM: 16.00 GiB (17,179,869,184 B) requested' requested_bytes=17179869184 "
      "device_free_bytes=64424509440 device_total_bytes=85899345920 api=CUDA_MALLOC",
      // NVTX: step [2, 6] us holding backward [4, 6], then step [7, 11].
      "track 3 'NVTX thread 7' in 1",
      "@2000 3 begin 'step'",
      "@4000 3 begin 'backward'",
      "@6000 3 end",
      "@6000 3 end",
      "@7000 3 begin 'step'",
      "@11000 3 end",
      "track 4 'iterations' in 1",
      // e0: the segment (allocated and reserved are PyTorch's: 0 until its first report).
      "track 5 'cuda:0 allocated' in 1 bytes",
      "@1000 5 counter = 0",
      "track 6 'cuda:0 reserved' in 1 bytes",
      "@1000 6 counter = 0",
      "track 7 'cuda:0 driver' in 1 bytes",
      "@1000 7 counter = 8388608",
      // e1: 1 MiB block; iteration 1 begins, forward.
      "@3000 5 counter = 1048576",
      "@3000 6 counter = 8388608",
      "@3000 4 begin 'iteration 1'",
      "@3000 4 begin 'forward'",
      // e2: 2 MiB block, in the backward range.
      "@5000 5 counter = 3145728",
      "@5000 4 end",
      "@5000 4 begin 'backward'",
      // e3: freed; iteration 1 ends where iteration 2 begins.
      "@8000 5 counter = 1048576",
      "@8000 4 end",
      "@8000 4 end",
      "@8000 4 begin 'iteration 2'",
      "@8000 4 begin 'forward'",
      // e4: the device sample: 80 - 60 GiB used, 5 GiB by other processes.
      "track 8 'cuda:0 device used' in 1 bytes",
      "@9000 8 counter = 21474836480",
      "track 9 'cuda:0 other processes' in 1 bytes",
      "@9000 9 counter = 5368709120",
      // The end of iteration 2: its last event (e5, the OOM, changes no counter).
      "@10000 4 end",
      "@10000 4 end",
  };
  EXPECT_EQ(describe(trace), expected);
  ASSERT_GT(trace.packet_size(), 1);
  for (int i = 0; i < trace.packet_size(); ++i) {
    EXPECT_EQ(trace.packet(i).trusted_packet_sequence_id(), 1u) << i;
    EXPECT_EQ(trace.packet(i).has_sequence_flags(), i == 0) << i;
  }
  EXPECT_EQ(trace.packet(0).sequence_flags(), uint32_t(pf::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED));
}

// Driver allocations only (allocated = reserved = driver), 8 events over 8 us, cut into 2 intervals of 4 us: the
// values 4, 12, 8 MiB in [0, 4) us are the lowest, the highest and the last, all kept; of 9, 1, 3, 2 MiB in [4, 8)
// the 3 MiB at 6 us is neither; 8 MiB at 8 us is the third interval's only value.
TEST(PerfettoExport, ThinnedCountersKeepEveryPeakAndTrough) {
  TraceBuilder b;
  b.start();
  const uint64_t a = 0x1000000, c = 0x2000000, d = 0x3000000, e = 0x4000000;
  b.event(test::driver_alloc(0, a, 4 * kMiB, 1000)).event(test::driver_alloc(0, c, 8 * kMiB, 1000));
  b.event(test::driver_free(0, a, 1000)).event(test::driver_alloc(0, d, kMiB, 1000));
  b.event(test::driver_free(0, c, 1000)).event(test::driver_alloc(0, e, 2 * kMiB, 1000));
  b.event(test::driver_free(0, d, 1000)).event(test::driver_alloc(0, a, 6 * kMiB, 1000));
  b.end(8, 0).end_chunk();
  pf::Trace thinned = export_perfetto(b.bytes(), "thinned.mtrace", PerfettoOptions{0, 2});
  std::vector<std::string> allocated;
  for (const std::string& line : describe(thinned))
    if (line.find(" 2 counter") != std::string::npos) allocated.push_back(line);
  EXPECT_EQ(allocated, (std::vector<std::string>{"@1000 2 counter = 4194304", "@2000 2 counter = 12582912",
                                                 "@3000 2 counter = 8388608", "@4000 2 counter = 9437184",
                                                 "@5000 2 counter = 1048576", "@7000 2 counter = 2097152",
                                                 "@8000 2 counter = 8388608"}));
  EXPECT_EQ(describe(thinned)[1], "track 2 'cuda:0 allocated' in 1 bytes");
  // Below the threshold: every change.
  pf::Trace exact = export_perfetto(b.bytes(), "exact.mtrace", PerfettoOptions{8, 2});
  size_t counters = 0;
  for (const std::string& line : describe(exact)) counters += line.find(" 2 counter") != std::string::npos;
  EXPECT_EQ(counters, 8u);
}

// An attached trace (attach_traces.h): each counter starts at time 0 at what was live at attach, all of it, with
// the baseline's reserved (one value, not one per record); then the events change allocated only.
TEST(PerfettoExport, CountersStartAtTheLiveSetAtAttach) {
  pf::Trace trace = export_perfetto(test::attached_torch_trace().bytes(), "perfetto-attach.mtrace");
  std::vector<std::string> counters;
  for (const std::string& line : describe(trace))
    if (line.find("counter") != std::string::npos || line.find("'cuda:0") != std::string::npos)
      counters.push_back(line);
  EXPECT_EQ(counters, (std::vector<std::string>{"track 2 'cuda:0 allocated' in 1 bytes", "@0 2 counter = 3145728",
                                                "track 3 'cuda:0 reserved' in 1 bytes", "@0 3 counter = 8388608",
                                                "track 4 'cuda:0 driver' in 1 bytes", "@0 4 counter = 8388608",
                                                "@1000000 2 counter = 2097152", "@2000000 2 counter = 3145728"}));
}

// Ranges that overlap without nesting go to a second track of the thread; a range never closed ends at the trace's
// end (here before it began: at its begin); times before the start (a clock gone back) are written as 0.
TEST(PerfettoExport, HostileRangesAndTimesStillNest) {
  TraceBuilder b;
  b.start();
  auto range = [](proto::RangeEvent::Kind kind, uint64_t name, uint64_t time_us, uint64_t id) {
    proto::Record r = test::range_event_record(kind, name, 7, time_us);
    r.mutable_range_event()->set_range_id(id);
    return r;
  };
  b.record(test::range_name_record(1, "a")).record(test::range_name_record(2, "b"));
  b.record(range(proto::RangeEvent::START, 1, 1, 11)).record(range(proto::RangeEvent::START, 2, 2, 12));
  b.record(range(proto::RangeEvent::END, 0, 3, 11)).record(range(proto::RangeEvent::END, 0, 4, 12));
  b.record(range(proto::RangeEvent::PUSH, 1, 5, 0));
  b.event(test::driver_alloc(0, 0x1000, 4 * kMiB, -5000)).event(test::driver_alloc(0, 0x2000, 4 * kMiB, 1000));
  b.end(2, 0).end_chunk();
  EXPECT_EQ(describe(export_perfetto(b.bytes(), "hostile.mtrace")),
            (std::vector<std::string>{"track 1 process 4242 [python train.py] 'python train.py'",
                                      "track 2 'NVTX thread 7' in 1", "@1000 2 begin 'a'",
                                      "track 3 'NVTX thread 7 (2)' in 1", "@2000 3 begin 'b'", "@3000 2 end",
                                      "@4000 3 end", "@5000 2 begin 'a'", "@5000 2 end",
                                      "track 4 'cuda:0 allocated' in 1 bytes", "@0 4 counter = 4194304",
                                      "track 5 'cuda:0 reserved' in 1 bytes", "@0 5 counter = 4194304",
                                      "track 6 'cuda:0 driver' in 1 bytes", "@0 6 counter = 4194304",
                                      "@0 4 counter = 8388608", "@0 5 counter = 8388608", "@0 6 counter = 8388608"}));
}

TEST(PerfettoExport, CommandWritesTheFile) {
  const std::string trace = test::temp_path("cli.mtrace"), out = test::temp_path("cli.pftrace");
  test::write_file(trace, test::perfetto_export_trace());
  test::MemtraceRun r = test::run_memtrace_binary("export --format perfetto " + trace + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
  std::ifstream in(out, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  pf::Trace decoded;
  ASSERT_TRUE(decoded.ParseFromString(bytes));
  EXPECT_EQ(decoded.packet_size(), 35);
}

// A rank of a job: pid, rank (none where negative), host, CLOCK_REALTIME at its start, and one driver allocation of
// `bytes` 1 us after the start, freed 2 us later.
std::string job_rank_trace(uint32_t pid, int rank, const std::string& host, uint64_t start_unix_ns, uint64_t bytes) {
  TraceBuilder b;
  proto::Record start;
  start.mutable_start()->set_pid(pid);
  start.mutable_start()->set_hostname(host);
  start.mutable_start()->set_start_monotonic_ns(1'000'000'000);
  start.mutable_start()->set_start_unix_ns(start_unix_ns);
  start.mutable_start()->add_argv("python");
  start.mutable_start()->add_argv("train.py");
  if (rank >= 0) start.mutable_start()->set_rank(uint32_t(rank));
  b.record(start);
  b.event(test::driver_alloc(0, 0x1000000, bytes, 1000)).event(test::driver_free(0, 0x1000000, 2000));
  b.end(2, 0).end_chunk();
  return b.bytes();
}

// Two ranks started 1 ms apart, given as a directory: one trace of two processes, each with its pid, its name, its
// own uuids (the second's from 2^32 + 1) and its times on the wall clock (its start_unix_ns plus its own times).
TEST(PerfettoExport, ManyTracesAreOneTraceOfManyProcesses) {
  const std::string dir = test::temp_path("perfetto-job"), out = test::temp_path("job.pftrace");
  ::mkdir(dir.c_str(), 0755);
  const uint64_t start_ns = 1'700'000'000'000'000'000;  // rank 0's CLOCK_REALTIME at its start
  test::write_file(dir + "/rank0.mtrace", job_rank_trace(100, 0, "node1", start_ns, 4 * kMiB));
  test::write_file(dir + "/rank1.mtrace", job_rank_trace(200, -1, "node2", start_ns + 1'000'000, 2 * kMiB));
  test::MemtraceRun r = test::run_memtrace_binary("export --format perfetto " + dir + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
  std::ifstream in(out, std::ios::binary);
  pf::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(std::string(std::istreambuf_iterator<char>(in), {})));
  EXPECT_EQ(
      describe(trace),
      (std::vector<std::string>{
          // rank 0: 4 MiB at 1 us, freed at 3 us after 1'700'000'000 s.
          "track 1 process 100 [python train.py] 'rank 0 / python / node1'", "track 2 'cuda:0 allocated' in 1 bytes",
          "@1700000000000001000 2 counter = 4194304", "track 3 'cuda:0 reserved' in 1 bytes",
          "@1700000000000001000 3 counter = 4194304", "track 4 'cuda:0 driver' in 1 bytes",
          "@1700000000000001000 4 counter = 4194304", "@1700000000000003000 2 counter = 0",
          "@1700000000000003000 3 counter = 0", "@1700000000000003000 4 counter = 0",
          // the second process (no rank): 2 MiB at 1 us, freed at 3 us after its start, 1 ms later.
          "track 4294967297 process 200 [python train.py] 'python / node2'",
          "track 4294967298 'cuda:0 allocated' in 4294967297 bytes",
          "@1700000000001001000 4294967298 counter = 2097152", "track 4294967299 'cuda:0 reserved' in 4294967297 bytes",
          "@1700000000001001000 4294967299 counter = 2097152", "track 4294967300 'cuda:0 driver' in 4294967297 bytes",
          "@1700000000001001000 4294967300 counter = 2097152", "@1700000000001003000 4294967298 counter = 0",
          "@1700000000001003000 4294967299 counter = 0", "@1700000000001003000 4294967300 counter = 0"}));
  for (int i = 0; i < trace.packet_size(); ++i) EXPECT_EQ(trace.packet(i).has_sequence_flags(), i == 0) << i;
  // The other formats still take one trace.
  r = test::run_memtrace_binary("export --format pprof " + dir + " -o " + test::temp_path("job.pb.gz"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "memtrace: --format pprof takes one trace; sqlite and perfetto take many");
}

}  // namespace
}  // namespace memtrace
