// `memtrace export --format sqlite TRACE... -o FILE` (export/sqlite_export.h): two processes built here, exported
// into one database and read back with SQL, row by row.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "trace_builder.h"

namespace memtrace {
namespace {

using test::make_event;
using test::run_memtrace_binary;
using test::TraceBuilder;

constexpr uint64_t kStartUnixNs = 1'700'000'000'000'000'000;
constexpr uint64_t kPythonFrame = 1ull << 63;  // stacks/stack_table.h kPythonFrameBit

// The rows `sql` returns from the database at `path`, as the sqlite3 shell prints them: columns joined by '|', NULL
// as nothing, one line per row.
std::string query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << path;
  std::string rows;
  char* error = nullptr;
  auto add_row = [](void* out, int columns, char** values, char**) {
    std::string& text = *static_cast<std::string*>(out);
    for (int i = 0; i < columns; ++i) text += std::string(i ? "|" : "") + (values[i] ? values[i] : "");
    text += '\n';
    return 0;
  };
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), add_row, &rows, &error), SQLITE_OK) << (error ? error : "") << sql;
  sqlite3_free(error);
  sqlite3_close(db);
  return rows;
}

proto::Record start_record(uint32_t pid, const std::string& host, uint64_t start_unix_ns) {
  proto::Record r;
  proto::TraceStart* start = r.mutable_start();
  start->set_pid(pid);
  start->set_ppid(1);
  start->set_hostname(host);
  start->add_argv("python");
  start->add_argv("train.py");
  start->set_start_monotonic_ns(1'000'000'000);
  start->set_start_unix_ns(start_unix_ns);
  return r;
}

proto::Record device_record(char uuid_byte, const std::string& name) {
  proto::Record r;
  r.mutable_device()->set_ordinal(0);
  r.mutable_device()->set_uuid(std::string(16, uuid_byte));
  r.mutable_device()->set_name(name);
  r.mutable_device()->set_total_bytes(uint64_t(80) << 30);
  return r;
}

// Rank 0 on host "node1", pid 100: a 4 MiB cudaMalloc segment and a 1 MiB PyTorch block in it, both from stack 5
// (train.py:42 step, called from train.py:7 <module>, under native return address 0x1234), then the block and the
// segment freed. Times (ns since start): 1000, 1500, 3500, 6500; the end 500 ns after the last event.
std::string rank0_trace() {
  TraceBuilder b;
  proto::Record start = start_record(100, "node1", kStartUnixNs);
  start.mutable_start()->set_rank(0);
  start.mutable_start()->set_local_rank(0);
  start.mutable_start()->set_world_size(2);
  start.mutable_start()->set_job_id("job7");
  b.record(start).record(device_record(char(0xab), "NVIDIA H200"));
  b.python_frame(1, "train.py", "step", 42).python_frame(2, "train.py", "<module>", 7);
  b.stack(5, {kPythonFrame | 1, kPythonFrame | 2, 0x1234});
  b.event(test::driver_alloc(0, 0x7f0000000000, 4 << 20, 1000, 5));
  b.event(test::torch_event(proto::ALLOC, 0, 0x7f0000000000, 1 << 20, 1 << 20, 4 << 20, 500, 5));
  b.event(test::torch_event(proto::FREE, 0, 0x7f0000000000, 1 << 20, 0, 4 << 20, 2000));
  b.event(test::driver_free(0, 0x7f0000000000, 3000));
  b.end(4, 500).end_chunk();
  return b.bytes();
}

// Rank 1 on host "node2", also pid 100 (pids repeat across hosts), one second later, no local rank nor job: a 2 MiB
// cudaMalloc from stack 9 (train.py:42 step again, under a Python frame of its own id, called from train.py:9
// other) at 2000 ns, never freed, and an NVML sample at 3000 ns (3 MiB this process, 5 MiB the others, 70 of 80 GiB
// free). No end record.
std::string rank1_trace() {
  TraceBuilder b;
  proto::Record start = start_record(100, "node2", kStartUnixNs + 1'000'000'000);
  start.mutable_start()->set_rank(1);
  start.mutable_start()->set_world_size(2);
  b.record(start).record(device_record(char(0x01), "NVIDIA H200"));
  b.python_frame(3, "train.py", "step", 42).python_frame(4, "train.py", "other", 9);
  b.stack(9, {kPythonFrame | 3, kPythonFrame | 4});
  b.event(test::driver_alloc(0, 0x7e0000000000, 2 << 20, 2000, 9));
  proto::Event sample = make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, 0, 0, 0, 1000);
  sample.set_device_free_bytes(uint64_t(70) << 30);
  sample.set_device_total_bytes(uint64_t(80) << 30);
  sample.set_process_used_bytes(3 << 20);
  sample.set_other_processes_used_bytes(5 << 20);
  b.event(sample).end_chunk();
  return b.bytes();
}

// The two traces in a directory of their own, exported into `database` (rank0.mtrace sorts first: process 1).
std::string export_two_ranks(const std::string& database) {
  const std::string dir = test::temp_path("ranks");
  ::mkdir(dir.c_str(), 0755);
  test::write_file(dir + "/rank1.mtrace", rank1_trace());
  test::write_file(dir + "/rank0.mtrace", rank0_trace());
  test::MemtraceRun r = run_memtrace_binary("export --format sqlite " + dir + " -o " + database);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  return dir;
}

TEST(SqliteExport, OneProcessRowPerTraceWithItsDevices) {
  const std::string db = test::temp_path("processes.sqlite");
  const std::string dir = export_two_ranks(db);
  EXPECT_EQ(query(db, "SELECT * FROM processes ORDER BY process_id"),
            "1|100|1|node1|0|0|2|job7|python train.py|1700000000000000000|1700000000000007000|4|0|" + dir +
                "/rank0.mtrace\n"
                "2|100|1|node2|1||2||python train.py|1700000001000000000|1700000001000003000|2|0|" +
                dir + "/rank1.mtrace\n");
  // Rank 0's peaks: 1 MiB allocated (the block), 4 MiB reserved (PyTorch's total); rank 1 has no block layer, so
  // both are its driver memory, 2 MiB.
  EXPECT_EQ(query(db, "SELECT * FROM devices ORDER BY process_id"),
            "1|0|GPU-abababab-abab-abab-abab-abababababab|NVIDIA H200|85899345920|1048576|4194304\n"
            "2|0|GPU-01010101-0101-0101-0101-010101010101|NVIDIA H200|85899345920|2097152|2097152\n");
  EXPECT_EQ(query(db, "PRAGMA user_version"), "1\n");
  EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok\n");
}

TEST(SqliteExport, EveryEventWithWallClockTimeAndTotalsAfterIt) {
  const std::string db = test::temp_path("events.sqlite");
  export_two_ranks(db);
  // Rank 0, device 0 has PyTorch's allocator: allocated is its live blocks, reserved PyTorch's reserved total,
  // which is 0 before its first report and drops to 0 when the segment that held the block is freed.
  EXPECT_EQ(query(db,
                  "SELECT start_unix_ns, time_ns, event_index, device, address, bytes, operation, memory, layer, api,"
                  " stack_id, allocated_bytes, reserved_bytes FROM events WHERE process_id = 1 ORDER BY event_index"),
            "1700000000000001000|1000|0|0|139637976727552|4194304|alloc|device|driver|CUDA_MALLOC|5|0|0\n"
            "1700000000000001500|1500|1|0|139637976727552|1048576|alloc|device|block|TORCH_ALLOCATOR|5|1048576|"
            "4194304\n"
            "1700000000000003500|3500|2|0|139637976727552|1048576|free|device|block|TORCH_ALLOCATOR|0|0|4194304\n"
            "1700000000000006500|6500|3|0|139637976727552|0|free|device|driver|CUDA_FREE|0|0|0\n");
  EXPECT_EQ(query(db,
                  "SELECT pid, gpu, operation, bytes, allocated_bytes, reserved_bytes, device_free_bytes,"
                  " process_used_bytes, other_processes_used_bytes FROM events WHERE process_id = 2"
                  " ORDER BY event_index"),
            "100|GPU-01010101-0101-0101-0101-010101010101|alloc|2097152|2097152|2097152|||\n"
            "100|GPU-01010101-0101-0101-0101-010101010101|device_usage|0|2097152|2097152|75161927680|3145728|"
            "5242880\n");
  // Allocated over the job, per host: 4 MiB + 1 MiB on node1, 2 MiB on node2.
  EXPECT_EQ(query(db,
                  "SELECT p.host, COUNT(*), SUM(e.bytes) FROM events e JOIN processes p USING (process_id)"
                  " WHERE e.operation = 'alloc' GROUP BY p.host ORDER BY p.host"),
            "node1|2|5242880\nnode2|1|2097152\n");
}

TEST(SqliteExport, StacksJoinToFramesSharedAcrossProcesses) {
  const std::string db = test::temp_path("stacks.sqlite");
  export_two_ranks(db);
  // Rank 0's stack 5, innermost first: two Python frames, then the native address outside every module (named by
  // its value, module "", offset 0).
  EXPECT_EQ(query(db,
                  "SELECT s.depth, f.kind, f.function, f.file, f.line, f.module, f.offset FROM stacks s"
                  " JOIN frames f USING (frame_id) WHERE s.process_id = 1 AND s.stack_id = 5 ORDER BY s.depth"),
            "0|python|step|train.py|42||\n"
            "1|python|<module>|train.py|7||\n"
            "2|native|0x1234||0||0\n");
  EXPECT_EQ(query(db, "SELECT process_id, stack_id, COUNT(*) FROM stacks GROUP BY 1, 2 ORDER BY 1, 2"),
            "1|5|3\n2|9|2\n");
  // train.py:42 step is one frame for both ranks (Python frame 1 in one trace, 3 in the other): 4 frames in all.
  EXPECT_EQ(query(db, "SELECT COUNT(DISTINCT frame_id) FROM stacks WHERE depth = 0"), "1\n");
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM frames"), "4\n");
  // The bytes allocated by innermost frame across the job: 4 + 1 + 2 MiB at train.py:42.
  EXPECT_EQ(query(db,
                  "SELECT f.file, f.line, f.function, COUNT(DISTINCT e.process_id), SUM(e.bytes) FROM events e"
                  " JOIN stacks s ON s.process_id = e.process_id AND s.stack_id = e.stack_id AND s.depth = 0"
                  " JOIN frames f ON f.frame_id = s.frame_id WHERE e.operation = 'alloc' GROUP BY f.frame_id"),
            "train.py|42|step|2|7340032\n");
}

TEST(SqliteExport, TracesGivenOneByOneKeepTheirOrder) {
  const std::string a = test::temp_path("order-a.mtrace"), b = test::temp_path("order-b.mtrace");
  const std::string db = test::temp_path("order.sqlite");
  test::write_file(a, rank0_trace());
  test::write_file(b, rank1_trace());
  test::MemtraceRun r = run_memtrace_binary("export --format sqlite " + b + " " + a + " -o " + db);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db, "SELECT process_id, host, events FROM processes ORDER BY process_id"), "1|node2|2\n2|node1|4\n");
  EXPECT_EQ(query(db, "SELECT process_id, COUNT(*) FROM events GROUP BY 1"), "1|2\n2|4\n");
}

TEST(SqliteExport, AnExistingFileIsReplacedAndATraceIsRefused) {
  const std::string a = test::temp_path("out-a.mtrace"), b = test::temp_path("out-b.mtrace");
  test::write_file(a, rank0_trace());
  test::write_file(b, rank1_trace());
  const std::string db = test::temp_path("replaced.sqlite");
  test::write_file(db, "not a database");
  test::MemtraceRun r = run_memtrace_binary("export --format sqlite " + a + " -o " + db);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM events"), "4\n");
  r = run_memtrace_binary("export --format sqlite " + a + " " + b + " -o " + b);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + b + ": is the trace being read; give -o another file\n");
  EXPECT_EQ(test::read_file(b), rank1_trace());
  r = run_memtrace_binary("export --format sqlite " + a + " -o /dev/null");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: /dev/null: is not a regular file; give -o a file\n");
  const std::string missing_dir = test::temp_path("no-such-dir") + "/out.sqlite";
  r = run_memtrace_binary("export --format sqlite " + a + " -o " + missing_dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + missing_dir + ": cannot write: No such file or directory\n");
}

TEST(SqliteExport, ABadTraceAmongManyIsOneLineAndLeavesWhatWasThere) {
  const std::string good = test::temp_path("good.mtrace"), junk = test::temp_path("junk.mtrace");
  test::write_file(good, rank0_trace());
  test::write_file(junk, "not a trace");
  const std::string db = test::temp_path("kept.sqlite");
  test::write_file(db, "kept");
  test::MemtraceRun r = run_memtrace_binary("export --format sqlite " + good + " " + junk + " -o " + db);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("memtrace: " + junk + ": "), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_EQ(test::read_file(db), "kept");
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(db).parent_path()))
    EXPECT_EQ(entry.path().filename().string().find("kept.sqlite.memtrace-"), std::string::npos)
        << "left behind: " << entry.path();
}

TEST(SqliteExport, TheOtherFormatsTakeOneTrace) {
  const std::string a = test::temp_path("one-a.mtrace"), b = test::temp_path("one-b.mtrace");
  test::write_file(a, rank0_trace());
  test::write_file(b, rank1_trace());
  test::MemtraceRun r = run_memtrace_binary("export --format csv " + a + " " + b + " -o " + test::temp_path("x.csv"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "memtrace: --format csv takes one trace; sqlite and perfetto take many");
  const std::string empty_dir = test::temp_path("no-traces");
  ::mkdir(empty_dir.c_str(), 0755);
  r = run_memtrace_binary("export --format sqlite " + a + " " + empty_dir + " -o " + test::temp_path("x.sqlite"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + empty_dir + ": no .mtrace files in it\n");
}

}  // namespace
}  // namespace memtrace
