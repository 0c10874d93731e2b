// `memtrace export --format csv` (export/event_csv.h): every event as one row, on a trace built here.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "attach_traces.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::run_memtrace_binary;
using test::TraceBuilder;

// An attached trace (attach_traces.h): a row per allocation live at attach, at time 0, before the events, with no
// event index; an aggregate of blocks not listed one by one is LIVE_AT_ATTACH_TOTAL at address 0.
TEST(EventCsv, WhatWasLiveAtAttachComesFirst) {
  const std::string trace = test::temp_path("csv-attach.mtrace"), csv = test::temp_path("csv-attach.csv");
  test::write_file(trace, test::attached_torch_trace().bytes());
  test::MemtraceRun r = run_memtrace_binary("export --format csv " + trace + " -o " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_file(csv),
            "event,time_ns,kind,layer,api,memory,device,stream,tid,address,size_bytes,result,stack_id,handle\n"
            ",0,LIVE_AT_ATTACH,LAYER_DRIVER,CUDA_MALLOC,MEMORY_DEVICE,0,0,0,0x10000000,8388608,0,0,0\n"
            ",0,LIVE_AT_ATTACH,LAYER_BLOCK,TORCH_ALLOCATOR,MEMORY_DEVICE,0,0,0,0x10000000,1048576,0,0,0\n"
            ",0,LIVE_AT_ATTACH,LAYER_BLOCK,TORCH_ALLOCATOR,MEMORY_DEVICE,0,0,0,0x10100000,2097152,0,0,0\n"
            "0,1000000,FREE,LAYER_BLOCK,TORCH_ALLOCATOR,MEMORY_DEVICE,0,0,0,0x10000000,1048576,0,0,0\n"
            "1,2000000,ALLOC,LAYER_BLOCK,TORCH_ALLOCATOR,MEMORY_DEVICE,0,0,0,0x10300000,1048576,0,10,0\n");
  test::write_file(trace, test::attached_unlisted_blocks_trace().bytes());
  r = run_memtrace_binary("export --format csv " + trace + " -o " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string rows = test::read_file(csv);
  EXPECT_EQ(rows.substr(0, rows.find("\n0,")),
            "event,time_ns,kind,layer,api,memory,device,stream,tid,address,size_bytes,result,stack_id,handle\n"
            ",0,LIVE_AT_ATTACH_TOTAL,LAYER_BLOCK,TORCH_ALLOCATOR,MEMORY_DEVICE,0,0,0,0x0,3145728,0,0,0");
}

TEST(EventCsv, EveryEventOneRowWithTheTraceClock) {
  TraceBuilder b;
  b.start();
  // 1 ms in: a 4 MiB cudaMalloc on device 0 from stack 7; 0.5 ms later a 1 MiB PyTorch block in it; then the
  // block freed (2 us later) and the segment freed with cudaFree (3 us later).
  b.event(test::driver_alloc(0, 0x7f0000000000, 4 << 20, 1000000, 7));
  b.event(test::torch_event(proto::ALLOC, 0, 0x7f0000000000, 1 << 20, 1 << 20, 4 << 20, 500000, 8));
  b.event(test::torch_event(proto::FREE, 0, 0x7f0000000000, 1 << 20, 0, 4 << 20, 2000));
  b.event(test::driver_free(0, 0x7f0000000000, 3000));
  b.end(4, 0).end_chunk();
  const std::string trace = test::temp_path("csv.mtrace"), csv = test::temp_path("csv.csv");
  test::write_file(trace, b.bytes());
  test::MemtraceRun r = run_memtrace_binary("export --format csv " + trace + " -o " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(test::read_file(csv),
            "event,time_ns,kind,layer,api,memory,device,stream,tid,address,size_bytes,result,stack_id,handle\n"
            "0,1000000,ALLOC,LAYER_DRIVER,CUDA_MALLOC,MEMORY_DEVICE,0,0,0,0x7f0000000000,4194304,0,7,0\n"
            "1,1500000,ALLOC,LAYER_BLOCK,TORCH_ALLOCATOR,MEMORY_DEVICE,0,0,0,0x7f0000000000,1048576,0,8,0\n"
            "2,1502000,FREE,LAYER_BLOCK,TORCH_ALLOCATOR,MEMORY_DEVICE,0,0,0,0x7f0000000000,1048576,0,0,0\n"
            "3,1505000,FREE,LAYER_DRIVER,CUDA_FREE,MEMORY_DEVICE,0,0,0,0x7f0000000000,0,0,0,0\n");
}

TEST(EventCsv, UnknownFormatAndUnreadableTraceAreOneLine) {
  const std::string csv = test::temp_path("bad.csv");
  test::MemtraceRun r =
      run_memtrace_binary("export --format xls " + std::string(MEMTRACE_EXAMPLE_OOM_TRACE) + " -o " + csv);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "memtrace: unknown --format 'xls' (formats: csv, memory-viz, perfetto, pprof, speedscope, folded, sqlite)");
  const std::string junk = test::temp_path("junk.mtrace");
  test::write_file(junk, "not a trace");
  r = run_memtrace_binary("export --format csv " + junk + " -o " + csv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(junk), std::string::npos) << r.err;
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// The output file (cli/report_session.h, write_output_file), as export and report share it.
TEST(ExportOutputFile, TheTraceItselfIsRefusedAndKept) {
  const std::string trace = test::temp_path("self.mtrace");
  const std::string bytes = test::read_file(MEMTRACE_EXAMPLE_OOM_TRACE);
  test::write_file(trace, bytes);
  test::MemtraceRun r = run_memtrace_binary("export --format csv " + trace + " -o " + trace);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + trace + ": is the trace being read; give -o another file\n");
  EXPECT_EQ(test::read_file(trace), bytes);
}

TEST(ExportOutputFile, AFailedWriteSaysWhyAndLeavesWhatWasThere) {
  test::MemtraceRun r =
      run_memtrace_binary("export --format csv " + std::string(MEMTRACE_EXAMPLE_OOM_TRACE) + " -o /dev/full");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: /dev/full: write failed: No space left on device\n");
  struct stat full {};
  ASSERT_EQ(::stat("/dev/full", &full), 0);  // a device is written in place and never removed
  EXPECT_TRUE(S_ISCHR(full.st_mode));
  const std::string missing_dir = test::temp_path("no-such-dir") + "/out.csv";
  r = run_memtrace_binary("export --format csv " + std::string(MEMTRACE_EXAMPLE_OOM_TRACE) + " -o " + missing_dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + missing_dir + ": cannot write: No such file or directory\n");
}

TEST(ExportOutputFile, AnExistingFileIsReplacedWhole) {
  const std::string csv = test::temp_path("replaced.csv");
  test::write_file(csv, std::string(1 << 20, '#'));  // longer than the export: nothing of it may stay
  test::MemtraceRun r =
      run_memtrace_binary("export --format csv " + std::string(MEMTRACE_EXAMPLE_OOM_TRACE) + " -o " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = test::read_file(csv);
  EXPECT_EQ(text.find('#'), std::string::npos);
  EXPECT_EQ(text.substr(0, 6), "event,");
}

}  // namespace
}  // namespace memtrace
