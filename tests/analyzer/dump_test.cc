// `memtrace dump` (export/record_dump.h): every record as one JSON line, on the example trace (figures read with
// `zstd -dc` and `protoc --decode=memtrace.proto.Record` record by record) and on traces built here.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "trace_builder.h"

namespace memtrace {
namespace {

using test::MemtraceRun;
using test::run_memtrace_binary;

// Marks a Python frame id in Stack.frames (proto/memtrace.proto).
constexpr uint64_t kStackPythonFrameBit = uint64_t(1) << 63;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Dump, ExampleTraceRecordByRecord) {
  MemtraceRun r = run_memtrace_binary(std::string("dump ") + MEMTRACE_EXAMPLE_OOM_TRACE);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<std::string> lines = lines_of(r.out);
  // 147 records: 67 Module, 63 Event (TraceEnd.events says 63), 8 Stack, 5 PythonFrame, 2 ThreadInfo, the
  // TraceStart and the TraceEnd.
  ASSERT_EQ(lines.size(), 147u);
  std::map<std::string, int> kinds;
  for (const std::string& line : lines) ++kinds[nlohmann::json::parse(line)["record"].get<std::string>()];
  EXPECT_EQ(
      kinds,
      (std::map<std::string, int>{
          {"end", 1}, {"event", 63}, {"module", 67}, {"python_frame", 5}, {"stack", 8}, {"start", 1}, {"thread", 2}}));
  EXPECT_EQ(
      lines[0],
      R"({"argv":["python3","/work/main/examples/torch_saved_oom.py",)"
      R"("/work/main/build/gpu-check/torch_saved_oom.truth.json"],"flush_interval_ms":200,"hostname":"vm",)"
      R"("job_id":"","job_id_source":"JOB_ID_NONE","pid":1318,"ppid":1317,"python_frames":51119088,"record":"start","start_monotonic_ns":111339895880,)"
      R"("start_unix_ns":1795983096250758284,"tracer_version":"memtrace 0.1.0"})");
  EXPECT_EQ(lines[1], R"({"name":"python3","record":"thread","tid":1318})");
  EXPECT_EQ(lines[2], R"({"file":"/work/main/examples/torch_saved_oom.py","function":"build_activations","id":1,)"
                      R"("line":30,"record":"python_frame"})");
  EXPECT_EQ(lines[4], R"({"file":"/work/main/examples/torch_saved_oom.py","function":"<module>","id":3,)"
                      R"("line":83,"record":"python_frame"})");
  // Record 6: stack 1, 29 frames, the 17th to 19th Python frames 1, 2, 3 (bit 63 set).
  nlohmann::json stack = nlohmann::json::parse(lines[5]);
  EXPECT_EQ(stack["record"], "stack");
  EXPECT_EQ(stack["id"], 1);
  ASSERT_EQ(stack["frames"].size(), 29u);
  EXPECT_EQ(stack["frames"][16].get<uint64_t>(), (uint64_t(1) << 63) | 1);
  EXPECT_EQ(stack["frames"][18].get<uint64_t>(), (uint64_t(1) << 63) | 3);
  // Record 7, the first event: cudaMalloc of 8 GiB on device 0 (sticky fields at their first value) with stack 1.
  EXPECT_EQ(lines[6],
            R"({"address":139702837444608,"api":"CUDA_MALLOC","capture_id":0,"context":1060706128,"device":0,)"
            R"("device_free_bytes":0,"device_total_bytes":0,"graph":0,"handle":0,"has_stack":true,"kind":"ALLOC",)"
            R"("layer":"LAYER_DRIVER","memory":"MEMORY_DEVICE","record":"event","result":0,"size":8589934592,)"
            R"("stack_id":1,"stream":0,"tid":1318})");
  EXPECT_EQ(lines[146],
            R"({"dropped_events":0,"events":63,"how":"EXIT","record":"end","signal":0,"time_delta_ns":141883253})");

  // --frames: stack 1 holds 26 native and 3 Python frames, neither cut.
  r = run_memtrace_binary(std::string("dump --frames ") + MEMTRACE_EXAMPLE_OOM_TRACE);
  ASSERT_EQ(r.exit_code, 0);
  nlohmann::json event = nlohmann::json::parse(lines_of(r.out).at(6));
  EXPECT_EQ(event["native_frames"], 26);
  EXPECT_EQ(event["python_frames"], 3);
  EXPECT_EQ(event["native_frames_cut"], false);
  EXPECT_EQ(event["python_frames_cut"], false);
}

TEST(Dump, AStackWrittenAfterItsEventIsFoundAndFramesAreCounted) {
  test::TraceBuilder b;
  b.start().event(test::driver_alloc(0, 0x1000, 4096, 0, /*stack_id=*/5)).event(test::driver_free(0, 0x1000));
  b.stack(5, {0x401000, 0x402000, kStackPythonFrameBit | 1}, /*native_frames_cut=*/true).end(2, 0).end_chunk();
  const std::string path = test::temp_path("dump-late-stack.mtrace");
  test::write_file(path, b.bytes());
  MemtraceRun r = run_memtrace_binary("dump " + path + " --frames");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 5u);
  nlohmann::json alloc = nlohmann::json::parse(lines[1]), free = nlohmann::json::parse(lines[2]);
  EXPECT_EQ(alloc["has_stack"], true);
  EXPECT_EQ(alloc["native_frames"], 2);
  EXPECT_EQ(alloc["python_frames"], 1);
  EXPECT_EQ(alloc["native_frames_cut"], true);
  EXPECT_EQ(alloc["python_frames_cut"], false);
  EXPECT_EQ(free["has_stack"], false);
  EXPECT_FALSE(free.contains("native_frames"));
  EXPECT_EQ(lines[3], R"({"frames":[4198400,4202496,9223372036854775809],"id":5,"native_frames_cut":true,)"
                      R"("python_frames_cut":false,"record":"stack"})");
}

TEST(Dump, NvmlProcessesListEachPidWithItsFigureWhereKnown) {
  proto::Record r;
  proto::NvmlProcesses* list = r.mutable_nvml_processes();
  list->set_device(1);
  list->add_processes()->set_pid(17);  // NVML could not say: no used_bytes
  proto::NvmlProcess* known = list->add_processes();
  known->set_pid(4242);
  known->set_used_bytes(1073741824);
  test::TraceBuilder b;
  b.start().record(r).end_chunk();
  const std::string path = test::temp_path("dump-nvml-processes.mtrace");
  test::write_file(path, b.bytes());
  MemtraceRun run = run_memtrace_binary("dump " + path);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = lines_of(run.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], R"({"device":1,"processes":[{"pid":17},{"pid":4242,"used_bytes":1073741824}],)"
                      R"("record":"nvml_processes"})");
}

TEST(Dump, HostileTextIsEscapedAndEveryLineIsJson) {
  // ESC ] (retitle the window) and BEL, a C1 CSI (U+009B), a right-to-left override (U+202E), DEL, CR LF and a
  // byte that is not UTF-8.
  test::TraceBuilder b;
  b.start().python_frame(1, "\x1b]0;pwned\x07.py", "f\xc2\x9bg\xe2\x80\xae", 7);
  b.notice(proto::Notice::PYTHON_UNSUPPORTED, "a\r\nb\x7f\xff").end_chunk();
  const std::string path = test::temp_path("dump-hostile.mtrace");
  test::write_file(path, b.bytes());
  MemtraceRun r = run_memtrace_binary("dump " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], R"({"file":"\u001b]0;pwned\u0007.py","function":"f\u009bg\u202e","id":1,"line":7,)"
                      R"("record":"python_frame"})");
  // The reader repairs the invalid byte to '?' (read/utf8_repair.h).
  EXPECT_EQ(lines[2], R"({"code":"PYTHON_UNSUPPORTED","count":0,"message":"a\r\nb\u007f?","record":"notice"})");
  for (char c : r.out) EXPECT_TRUE(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f)) << int(c);
  EXPECT_EQ(nlohmann::json::parse(lines[1])["function"], "f\xc2\x9bg\xe2\x80\xae");  // the same text, decoded
}

TEST(Dump, ADamagedTraceIsOneLineAndExit2BeforeAnyRecord) {
  const std::string path = test::temp_path("dump-not-a-trace.mtrace");
  test::write_file(path, "this is not a trace\n");
  MemtraceRun r = run_memtrace_binary("dump " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": not a memtrace trace: no memtrace header frame (at byte 0)\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

TEST(Dump, AttachRecordsAndTheStartsAttachFields) {
  test::TraceBuilder b(3);
  b.attach_start(proto::TraceStart::ATTACH_DORMANT, 1, true, true, 1'000'000'000, 0);
  b.live_at_attach(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0, 3 << 20, /*blocks_unknown=*/true);
  b.attach_baseline(0, 100, 200, -1, 4 << 20).end(0, 0, proto::TraceEnd::DETACH).end_chunk();
  const std::string path = test::temp_path("dump-attach.mtrace");
  test::write_file(path, b.bytes());
  test::MemtraceRun run = test::run_memtrace_binary("dump " + path);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = lines_of(run.out);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find(R"("attach_number":1,"driver_layer_attached":true,)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(R"("origin":"ATTACH_DORMANT",)"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], R"({"address":0,"api":"TORCH_ALLOCATOR","blocks_unknown":true,"device":0,)"
                      R"("expandable_segment":false,"layer":"LAYER_BLOCK","memory":"MEMORY_DEVICE",)"
                      R"("record":"live_at_attach","size":3145728,"stream":0,"torch_segment":false})");
  EXPECT_EQ(lines[2], R"({"allocator_reserved_bytes":4194304,"device":0,"device_free_bytes":100,)"
                      R"("device_total_bytes":200,"record":"attach_baseline"})");
  EXPECT_NE(lines[3].find(R"("how":"DETACH")"), std::string::npos) << lines[3];
  // A trace from launch: the start line has none of the attach fields.
  test::TraceBuilder launch;
  launch.start().end_chunk();
  test::write_file(path, launch.bytes());
  run = test::run_memtrace_binary("dump " + path);
  EXPECT_EQ(run.out.find("origin"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace memtrace
