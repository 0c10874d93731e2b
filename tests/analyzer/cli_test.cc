// The memtrace executable itself: exit codes, the one-line error, and the JSON/CSV outputs scripts use.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "analysis_trace.h"

namespace memtrace {
namespace {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

CliResult run_memtrace(const std::string& args) {
  std::string out = test::temp_path("cli.out"), err = test::temp_path("cli.err");
  int status = std::system((std::string(MEMTRACE_BIN) + " " + args + " >" + out + " 2>" + err).c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = test::read_file(out);
  r.err = test::read_file(err);
  return r;
}

// An installed layout <prefix>/bin/memtrace + <prefix>/lib/libmemtrace.so, for `memtrace run` (which looks for the
// tracer next to itself; a build that made only the analyzer has none). The library is an empty file: the dynamic
// loader says it cannot preload it and carries on, which is all these tests need.
std::filesystem::path installed_prefix(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path prefix = test::temp_path(name);
  fs::remove_all(prefix);
  fs::create_directories(prefix / "bin");
  fs::create_directories(prefix / "lib");
  fs::copy_file(MEMTRACE_BIN, prefix / "bin" / "memtrace");
  test::write_file((prefix / "lib" / "libmemtrace.so").string(), "");
  return prefix;
}

TEST(Cli, AnEmptyTraceNameIsAUsageError) {
  // `memtrace summary "$TRACE"` with TRACE unset: said as such, not as "memtrace: : cannot open".
  CliResult r = run_memtrace("summary ''");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), "memtrace: the TRACE file name is empty\n");
  EXPECT_EQ(r.out, "");
}

TEST(Cli, VersionIsTheProjectsOne) {
  // MEMTRACE_VERSION is CMake's project version, the same the tracer writes into each trace.
  CliResult r = run_memtrace("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "memtrace " MEMTRACE_VERSION "\n");
  EXPECT_EQ(std::string(MEMTRACE_VERSION), "0.1.0");  // CMakeLists.txt: project(memtrace VERSION 0.1.0)
}

TEST(Cli, BadFileIsOneErrorLineAndExitCode2) {
  std::string path = test::temp_path("not-a-trace.mtrace");
  test::write_file(path, "this is not a trace\n");
  CliResult r = run_memtrace("summary " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": not a memtrace trace: no memtrace header frame (at byte 0)\n");
  EXPECT_EQ(r.out, "");
}

TEST(Cli, AMissingFileOrADirectoryIsOneLineWithoutAByteOffset) {
  std::string path = test::temp_path("no-such-trace.mtrace");
  CliResult r = run_memtrace("summary " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": cannot open: No such file or directory\n");
  std::string dir = test::temp_path("");
  r = run_memtrace("peak " + dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + dir + ": is a directory, not a memtrace trace\n");
  // leaks (summary, oom) read every trace in a directory: one without any is one line, and nothing on stdout.
  std::string empty = test::temp_path("no-traces-here/");
  std::filesystem::create_directories(empty);
  r = run_memtrace("leaks " + empty);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + empty + ": no .mtrace files in it\n");
  EXPECT_EQ(r.out, "");
}

TEST(Cli, CorruptChunkNamesItsByte) {
  test::TraceBuilder b = test::small_torch_trace();
  std::string bytes = b.bytes();
  size_t checksum_byte = b.chunk_offsets()[2] - 1;  // last byte of chunk 1's checksum
  bytes[checksum_byte] = char(bytes[checksum_byte] ^ 0xff);
  std::string path = test::temp_path("corrupt.mtrace");
  test::write_file(path, bytes);
  CliResult r = run_memtrace("leaks " + path + " --json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": corrupt chunk: Restored data doesn't match checksum (at byte " +
                       std::to_string(b.chunk_offsets()[1]) + ")\n");
}

TEST(Cli, EmptyFileAndOtherVersionAreOneLineNamingFileAndVersion) {
  std::string path = test::temp_path("empty.mtrace");
  test::write_file(path, "");
  CliResult r = run_memtrace("summary " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": empty file, not a memtrace trace\n");
  test::write_file(path, test::header_frame(4));
  r = run_memtrace("timeline " + path + " --csv");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path +
                       ": unsupported trace format version 4 (this memtrace reads versions 1 to 3) (at byte 16)\n");
  EXPECT_EQ(r.out, "");
}

TEST(Cli, UsageErrorsExit1) {
  EXPECT_EQ(run_memtrace("").exit_code, 1);
  EXPECT_EQ(run_memtrace("frobnicate x").exit_code, 1);
  EXPECT_EQ(run_memtrace("timeline x.mtrace").exit_code, 1);  // needs --csv or --json
  EXPECT_EQ(run_memtrace("peak a.mtrace b.mtrace").exit_code, 1);  // summary, leaks, oom take many
}

TEST(Cli, IntervalOutOfRangeOrNotDecimalIsAUsageError) {
  std::string path = test::temp_path("interval.mtrace");
  test::write_file(path, test::small_torch_trace().bytes());
  // 1e10 s is 1e19 ns, past INT64_MAX (9.2e18): it used to overflow and give a row per event. The limit,
  // 1e9 s, is taken; so is the smallest, a nanosecond.
  // Below a nanosecond (the trace's resolution) it would silently be one.
  for (const char* bad : {"1e10", "1000000001", "0x10", "inf", "nan", "0", "-1", "1s", "1e-12"}) {
    CliResult r = run_memtrace("timeline " + path + " --csv --interval " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1),
              std::string("memtrace: --interval needs a number of seconds from 1e-9 to 1000000000, not '") + bad +
                  "'\n")
        << bad;
  }
  for (const char* good : {"1e9", "1e-9", "0.5"})
    EXPECT_EQ(run_memtrace("timeline " + path + " --csv --interval " + good).exit_code, 0) << good;
}

TEST(Cli, HelpOfEachCommandIsTheUsageOnStandardOutput) {
  const CliResult top = run_memtrace("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_EQ(top.out.rfind("usage: memtrace run [-o PATH] -- CMD ARGS...", 0), 0u);
  for (const char* args : {"summary --help", "leaks x.mtrace -h", "oom --json --help", "timeline --help", "run --help",
                           "run -o x.mtrace --help"}) {
    CliResult r = run_memtrace(args);
    EXPECT_EQ(r.exit_code, 0) << args;
    EXPECT_EQ(r.out, top.out) << args;
    EXPECT_EQ(r.err, "") << args;
  }
  // After run's CMD, --help is the command's own: the shell prints the word it was given.
  const std::string installed = (installed_prefix("help-prefix") / "bin" / "memtrace").string();
  const std::string out = test::temp_path("help.out");
  int status = std::system((installed + " run -- sh -c 'echo \"$0\"' --help >" + out + " 2>/dev/null").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(test::read_file(out), "--help\n");
}

TEST(Cli, SummaryJsonHasTheDocumentedKeys) {
  std::string path = test::temp_path("small.mtrace");
  test::write_file(path, test::small_torch_trace().bytes());
  CliResult r = run_memtrace("summary " + path + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trace"]["events"], 8);
  EXPECT_EQ(j["trace"]["truncated"], false);
  ASSERT_EQ(j["devices"].size(), 1u);
  const auto& d = j["devices"][0];
  EXPECT_EQ(d["device"], 0);
  EXPECT_EQ(d["peak_allocated_bytes"], 5 * test::kMiB);
  EXPECT_EQ(d["peak_reserved_bytes"], 8 * test::kMiB);
  EXPECT_EQ(d["peak_driver_bytes"], 8 * test::kMiB);
  EXPECT_EQ(d["final_allocated_bytes"], 2 * test::kMiB);
  EXPECT_EQ(d["final_reserved_bytes"], 8 * test::kMiB);
  EXPECT_EQ(d["final_driver_bytes"], 8 * test::kMiB);
  EXPECT_EQ(d["driver_allocations"], 1);
  EXPECT_EQ(d["driver_frees"], 0);
  EXPECT_EQ(d["block_allocations"], 4);
  EXPECT_EQ(d["block_frees"], 2);
  EXPECT_EQ(d["allocator_layer"], true);
  ASSERT_EQ(j["leaks"].size(), 1u);
  EXPECT_EQ(j["leaks"][0]["bytes"], 3 * test::kMiB);
  EXPECT_EQ(j["leaks"][0]["count"], 3);
  EXPECT_EQ(j["leaks"][0]["growing"], true);
  EXPECT_EQ(j["leaks"][0]["frames"][0],
            (nlohmann::json{{"function", "train_step"}, {"file", "train.py"}, {"line", 42}, {"python", true}}));
  EXPECT_TRUE(j["ooms"].is_array());
}

TEST(Cli, SummaryTextShowsBytesAndFrames) {
  std::string path = test::temp_path("small-text.mtrace");
  test::write_file(path, test::small_torch_trace().bytes());
  CliResult r = run_memtrace("summary " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("peak allocated 5.00 MiB (5,242,880 B) at 0.004 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    > train.py:42 train_step\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GROWS step after step: 3 allocations of 1.00 MiB (1,048,576 B) each"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("TORCH_HOOK_MISSING"), std::string::npos) << r.out;
}

TEST(Cli, UnsymbolizedNativeFramesAreOneLineUnlessAllFrames) {
  // Three return addresses in a module whose file is not on this machine, then a Python frame.
  test::TraceBuilder b;
  proto::Record module;
  module.mutable_module()->set_path("/nonexistent/libgone.so");
  module.mutable_module()->set_load_address(0x10000);
  module.mutable_module()->set_start(0x10000);
  module.mutable_module()->set_end(0x20000);
  // Stack 6: the same three frames without a Python frame (a C++ program's stack).
  b.start().record(module).python_frame(1, "job.py", "run", 3);
  b.stack(5, {0x10010, 0x10020, 0x10030, test::kPy | 1}).stack(6, {0x10010, 0x10020, 0x10030});
  b.event(test::driver_alloc(0, 0xA000, 4096, 1000, 5)).event(test::driver_alloc(0, 0xB000, 2048, 2000, 6));
  b.end_chunk();
  std::string path = test::temp_path("unsymbolized.mtrace");
  test::write_file(path, b.bytes());
  CliResult r = run_memtrace("leaks " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // With a Python frame, the native frames are the folded line's; without, one line of their own.
  EXPECT_NE(r.out.find("    > job.py:3 run\n"
                       "      native: in libgone.so (3 frames, not symbolized on this machine; --all-frames shows "
                       "them)\n"
                       "    #2 device 0: 2.00 KiB (2,048 B) in 1 allocation\n"
                       "      [3 frames in libgone.so: not symbolized on this machine, --all-frames shows the "
                       "offsets]\n"),
            std::string::npos)
      << r.out;
  r = run_memtrace("leaks " + path + " --all-frames");
  EXPECT_NE(r.out.find("      libgone.so+0x10 /nonexistent/libgone.so\n"
                       "      libgone.so+0x20 /nonexistent/libgone.so\n"
                       "      libgone.so+0x30 /nonexistent/libgone.so\n"
                       "      job.py:3 run\n"),
            std::string::npos)
      << r.out;
}

TEST(Cli, TimelineCsvOneRowPerChange) {
  test::TraceBuilder b;
  b.start()
      .event(test::driver_alloc(0, 0xA000, 1000, 500'000'000))
      .event(test::driver_alloc(0, 0xB000, 24, 250'000'000));
  b.event(test::driver_free(0, 0xA000, 250'000'000)).end_chunk();
  std::string path = test::temp_path("timeline.mtrace");
  test::write_file(path, b.bytes());
  CliResult r = run_memtrace("timeline " + path + " --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Driver level only: reserved = allocated (0 between them), no PyTorch segments (empty columns).
  EXPECT_EQ(r.out,
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes\n"
            "0.500000000,0,1000,1000,1000,0,,\n"
            "0.750000000,0,1024,1024,1024,0,,\n"
            "1.000000000,0,24,24,24,0,,\n");
  // Sampled every second: the rows at 0.5 and 0.75 s share the first interval; its row is at 0.75 s with
  // the highest totals of the interval (here also the last).
  r = run_memtrace("timeline " + path + " --csv --interval 1");
  EXPECT_EQ(r.out,
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes\n"
            "0.750000000,0,1024,1024,1024,0,,\n"
            "1.000000000,0,24,24,24,0,,\n");
  r = run_memtrace("timeline " + path + " --json");
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][1]["driver_bytes"], 1024);
  EXPECT_EQ(j["trace"]["events"], 3);
}

// A sampled timeline keeps each interval's peak even when the interval ends lower: 1000 B at 0.2 s,
// +24 B at 0.4 s (1024, the peak), -1000 B at 0.6 s (24) all fall in [0, 1 s): one row at 0.6 s, 1024 B.
TEST(Cli, TimelineIntervalKeepsThePeak) {
  test::TraceBuilder b;
  b.start()
      .event(test::driver_alloc(0, 0xA000, 1000, 200'000'000))
      .event(test::driver_alloc(0, 0xB000, 24, 200'000'000))
      .event(test::driver_free(0, 0xA000, 200'000'000))
      .event(test::driver_alloc(0, 0xC000, 8, 600'000'000))  // 1.2 s: 32 B, second interval
      .end_chunk();
  std::string path = test::temp_path("timeline-peak.mtrace");
  test::write_file(path, b.bytes());
  CliResult r = run_memtrace("timeline " + path + " --csv --interval 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes\n"
            "0.600000000,0,1024,1024,1024,0,,\n"
            "1.200000000,0,32,32,32,0,,\n");
  std::remove(path.c_str());
}

// A file with the header only: the process died before the first flush. Analyzed (exit 0), and said.
TEST(Cli, HeaderOnlyTraceSaysNothingWasFlushed) {
  test::TraceBuilder b;  // header, no chunk
  std::string path = test::temp_path("header-only.mtrace");
  test::write_file(path, b.bytes());
  CliResult r = run_memtrace("summary " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  no records: the process was cut off before the tracer's first flush (MEMTRACE_FLUSH_MS)\n"),
            std::string::npos)
      << r.out;
  std::remove(path.c_str());
}

// A trace started at Unix time 1,700,000,000 s (2023-11-14 22:13:20 UTC), two 1 KiB allocations at
// 1 and 3 ms in two chunks, then `end` (or nothing) in a third chunk.
test::TraceBuilder ended_trace(const std::function<void(test::TraceBuilder&)>& end) {
  test::TraceBuilder b;
  b.start(1'000'000'000, 1'700'000'000'000'000'000).event(test::driver_alloc(0, 0xA000, 1024, 1'000'000)).end_chunk();
  b.event(test::driver_alloc(0, 0xB000, 1024, 2'000'000)).end_chunk();
  end(b);
  return b;
}

TEST(Cli, TraceHealthSaysHowTheProcessEnded) {
  struct Case {
    std::function<void(test::TraceBuilder&)> end;
    std::string text, json_how;
    int signal;
  };
  std::vector<Case> cases = {
      {[](test::TraceBuilder& b) { b.end(2, 1'000'000).end_chunk(); }, "process ended normally", "EXIT", 0},
      {[](test::TraceBuilder& b) { b.end(2, 1'000'000, proto::TraceEnd::UNDERSCORE_EXIT).end_chunk(); },
       "ended with _exit", "UNDERSCORE_EXIT", 0},
      {[](test::TraceBuilder& b) { b.end(2, 1'000'000, proto::TraceEnd::SIGNAL, 11).end_chunk(); },
       "killed by signal 11 (SIGSEGV)", "SIGNAL", 11},
      {[](test::TraceBuilder& b) { b.end(2, 1'000'000, proto::TraceEnd::EXEC).end_chunk(); }, "replaced by exec",
       "EXEC", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::string path = test::temp_path("ended.mtrace");
    test::write_file(path, ended_trace(c.end).bytes());
    CliResult r = run_memtrace("summary " + path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Complete: the last event (3 ms) is what is shown; the end record adds 1 ms to the duration.
    EXPECT_NE(r.out.find("  events read 2, complete, " + c.text +
                         ", last event at 0.003 s (2023-11-14 22:13:20.003 UTC)\n"),
              std::string::npos)
        << r.out;
    r = run_memtrace("summary " + path + " --json");
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["trace"]["end"], (nlohmann::json{{"how", c.json_how}, {"signal", c.signal}}));
    EXPECT_EQ(j["trace"]["ended_normally"], c.json_how == "EXIT");
    EXPECT_DOUBLE_EQ(j["trace"]["duration_s"].get<double>(), 0.004);
  }
}

TEST(Cli, TruncatedTraceGivesItsLastCompleteTimestamp) {
  // Cut 3 bytes before the end of the third chunk (the end record): chunks 1 and 2 are read, the
  // last complete event is the allocation at 3 ms, and there is no end record.
  test::TraceBuilder b = ended_trace([](test::TraceBuilder& b) { b.end(2, 1'000'000).end_chunk(); });
  std::string path = test::temp_path("truncated-health.mtrace");
  test::write_file(path, b.bytes().substr(0, b.bytes().size() - 3));
  CliResult r = run_memtrace("summary " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  events read 2, TRUNCATED, no end record (cut off: kill -9, crash or write error), "
                       "last complete event at 0.003 s (2023-11-14 22:13:20.003 UTC)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  TRUNCATED: the writer was cut off; read up to byte " + std::to_string(b.chunk_offsets()[2]) +
                       " of " + std::to_string(b.bytes().size() - 3)),
            std::string::npos)
      << r.out;
  r = run_memtrace("summary " + path + " --json");
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trace"]["truncated"], true);
  EXPECT_EQ(j["trace"]["end"], (nlohmann::json{{"how", nullptr}, {"signal", 0}}));
  EXPECT_DOUBLE_EQ(j["trace"]["last_complete_time_s"].get<double>(), 0.003);
  EXPECT_EQ(j["trace"]["last_complete_utc"], "2023-11-14 22:13:20.003 UTC");
  EXPECT_EQ(j["devices"][0]["final_driver_bytes"], 2048);  // 1 KiB + 1 KiB
}

TEST(Cli, TeardownFreesAreFreedAndUnderTraceHealth) {
  // 1 KiB at 0xA000 and 0xB000; both freed at exit with CUDA_ERROR_DEINITIALIZED (4): final driver 0.
  test::TraceBuilder b = ended_trace([](test::TraceBuilder& b) {
    for (uint64_t address : {0xA000, 0xB000}) {
      proto::Event e = test::driver_free(0, address, 1000);
      e.set_result(4);
      b.event(e);
    }
    b.end(4, 1000).end_chunk();
  });
  std::string path = test::temp_path("teardown.mtrace");
  test::write_file(path, b.bytes());
  CliResult r = run_memtrace("summary " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  teardown frees 2 (freed while CUDA was shutting down, counted as freed)\n"),
            std::string::npos)
      << r.out;
  r = run_memtrace("summary " + path + " --json");
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trace"]["teardown_frees"], 2);
  EXPECT_EQ(j["trace"]["failed_frees"], 0);
  EXPECT_EQ(j["devices"][0]["final_driver_bytes"], 0);
  EXPECT_EQ(j["devices"][0]["driver_frees"], 2);
}

// `shell_prefix` MEMTRACE_BIN `args` through the shell, e.g. with a `timeout 10` or a `ulimit` in front.
CliResult run_memtrace_with(const std::string& shell_prefix, const std::string& args) {
  std::string out = test::temp_path("cli.out"), err = test::temp_path("cli.err");
  int status =
      std::system((shell_prefix + " " + std::string(MEMTRACE_BIN) + " " + args + " >" + out + " 2>" + err).c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = test::read_file(out);
  r.err = test::read_file(err);
  return r;
}

TEST(Cli, AFifoOrADeviceIsRefusedAtOnce) {
  // Opening a FIFO for reading waits for a writer: the analyzer blocked forever. `timeout 10` turns a
  // regression into a failure (its 124) rather than a hang.
  std::string fifo = test::temp_path("trace.fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const char* command : {"summary", "timeline --csv", "leaks", "oom"}) {
    SCOPED_TRACE(command);
    CliResult r = run_memtrace_with("timeout 10", std::string(command) + " " + fifo);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "memtrace: " + fifo +
                         ": is a FIFO (named pipe), not a regular file (a trace is read from a file, twice)\n");
    EXPECT_EQ(r.out, "");
  }
  CliResult r = run_memtrace_with("timeout 10", "summary /dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memtrace: /dev/zero: is a character device, not a regular file (a trace is read from a file, twice)\n");
  // /dev/stdin is a FIFO here: `echo | memtrace summary /dev/stdin`.
  r = run_memtrace_with("echo |", "summary /dev/stdin");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memtrace: /dev/stdin: is a FIFO (named pipe), not a regular file (a trace is read from a file, twice)\n");
}

TEST(Cli, TwoTracesJoinedAreOneLineNamingTheSecondsByte) {
  std::string one = test::small_torch_trace().bytes();
  std::string path = test::temp_path("joined.mtrace");
  test::write_file(path, one + one);
  for (const char* command : {"summary", "summary --json", "timeline --csv", "leaks", "oom"}) {
    SCOPED_TRACE(command);
    CliResult r = run_memtrace(std::string(command) + " " + path);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "memtrace: " + path + ": a second trace begins at byte " + std::to_string(one.size()) +
                         " (two traces joined, e.g. with cat); split the file there\n");
    EXPECT_EQ(r.out, "");
  }
}

TEST(Cli, ZerosAfterTheLastChunkAreATruncatedTraceThatSaysSo) {
  test::TraceBuilder b = test::small_torch_trace();
  std::string path = test::temp_path("zero-tail.mtrace");
  test::write_file(path, b.bytes() + std::string(512, '\0'));
  CliResult r = run_memtrace("summary " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  TRUNCATED: the writer was cut off; read up to byte " + std::to_string(b.bytes().size()) +
                       " of " + std::to_string(b.bytes().size() + 512)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  after byte " + std::to_string(b.bytes().size()) +
                       ": 512 bytes of zeros (the file's size was extended but its data never written, as when "
                       "the machine stops)\n"),
            std::string::npos)
      << r.out;
  r = run_memtrace("summary --json " + path);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trace"]["truncated"], true);
  EXPECT_EQ(j["trace"]["complete_bytes"], b.bytes().size());
  EXPECT_EQ(j["trace"]["truncated_tail"],
            "512 bytes of zeros (the file's size was extended but its data never written, as when the machine stops)");
  // Every chunk read: the same numbers as the trace without the zeros.
  std::string clean = test::temp_path("zero-tail-clean.mtrace");
  test::write_file(clean, b.bytes());
  EXPECT_EQ(j["devices"], nlohmann::json::parse(test::memtrace_stdout("summary --json " + clean))["devices"]);
  EXPECT_EQ(j["trace"]["events"], 8);  // 3 in the second chunk, 5 in the third
  // timeline says it on stderr, and in its JSON.
  r = run_memtrace("timeline --csv " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "memtrace: " + path + ": truncated trace, rows up to the last complete chunk (after byte " +
                       std::to_string(b.bytes().size()) +
                       ": 512 bytes of zeros (the file's size was extended but its data never written, as when "
                       "the machine stops))\n");
  r = run_memtrace("timeline --json " + path);
  EXPECT_EQ(nlohmann::json::parse(r.out)["trace"]["truncated_tail"], j["trace"]["truncated_tail"]);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(Cli, OutOfMemoryIsOneLineNamingTheFile) {
  // A chunk that declares 64 MiB of content is decoded into one 64 MiB block; with 50 MB of address
  // space the allocation fails. The line names the trace (it used to name the command). Sanitizer builds
  // reserve terabytes of address space, hence not there.
  std::string record = test::varint(2) + std::string("\x42\x00", 2);  // Record{end: {}}, 3 bytes
  std::string content;
  content.reserve(64 << 20);
  while (content.size() + record.size() <= (64u << 20)) content += record;
  std::string path = test::temp_path("big-chunk.mtrace");
  test::write_file(path, test::header_frame() + test::compress_frame(content));
  CliResult r = run_memtrace_with("ulimit -v 50000;", "summary " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": out of memory while analyzing it\n");
}
#endif

TEST(Cli, RunPrependsTheTracerToLdPreloadAndReturnsTheCommandsStatus) {
  namespace fs = std::filesystem;
  fs::path prefix = installed_prefix("run-prefix");
  std::string out = test::temp_path("run.out");
  std::string command = "LD_PRELOAD=/nonexistent/other.so " + (prefix / "bin" / "memtrace").string() +
                        " run -o /tmp/x-%p.mtrace -- /bin/sh -c 'echo \"$LD_PRELOAD|$MEMTRACE_OUTPUT\"; exit 3' >" +
                        out + " 2>/dev/null";
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_EQ(test::read_file(out),
            (prefix / "lib" / "libmemtrace.so").string() + ":/nonexistent/other.so|/tmp/x-%p.mtrace\n");
  // A command that does not exist: the shell's 127.
  status = std::system(((prefix / "bin" / "memtrace").string() + " run -- /nonexistent/program 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(status), 127);
}

}  // namespace
}  // namespace memtrace
