// `memtrace export --format memory-viz` (export/memory_viz.h) and its pickle writer (export/pickle_writer.h): the
// writer's exact bytes, what python3's pickle.loads makes of them, and the snapshot of traces built here, worked
// out by hand, checked for the consistency PyTorch's readers need (memory_viz_check.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "attach_traces.h"
#include "export/pickle_writer.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using nlohmann::json;
using test::TraceBuilder;

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(char(v));
  return out;
}

// python3 -c PROGRAM FILE: its exit status (0: the program's assertions held).
int run_python(const std::string& program, const std::string& file) {
  std::string script = test::temp_path("check.py");
  std::ofstream(script) << program;
  return std::system(("python3 " + script + " " + file + " >&2").c_str());
}

// ---- the pickle writer -------------------------------------------------------------------------------------

TEST(PickleWriter, ScalarsDictTupleAndListBytes) {
  std::ostringstream out;
  PickleWriter w(out);
  w.begin_dict();
  w.key("a");
  w.begin_list();
  w.integer(1);
  w.integer(300);
  w.integer(-1);
  w.unsigned_integer(uint64_t(1) << 40);
  w.end_list();
  w.key("b");
  w.none();
  w.key("c");
  w.boolean(true);
  w.key("d");
  w.real(1.5);
  w.key("e");
  w.begin_tuple();
  w.integer(0);
  w.integer(0);
  w.end_tuple();
  w.key("f");
  w.unsigned_integer(UINT64_MAX);
  w.key("g");
  w.integer(INT64_MIN);
  w.end_dict();
  w.finish();
  // PROTO 4; EMPTY_DICT MARK; "a" EMPTY_LIST MARK BININT1 1, BININT2 300, BININT -1, LONG1 6 bytes 2^40, APPENDS;
  // "b" NONE; "c" NEWTRUE; "d" BINFLOAT 1.5 big-endian; "e" MARK 0 0 TUPLE; "f" LONG1 9 bytes; "g" LONG1 8 bytes;
  // SETITEMS; STOP.
  std::string expected =
      bytes({0x80, 4,    '}',  '(',  0x8c, 1,    'a',  ']', '(',  'K',  1,    'M',  0x2c, 0x01, 'J',  0xff, 0xff, 0xff,
             0xff, 0x8a, 6,    0,    0,    0,    0,    0,   1,    'e',  0x8c, 1,    'b',  'N',  0x8c, 1,    'c',  0x88,
             0x8c, 1,    'd',  'G',  0x3f, 0xf8, 0,    0,   0,    0,    0,    0,    0x8c, 1,    'e',  '(',  'K',  0,
             'K',  0,    't',  0x8c, 1,    'f',  0x8a, 9,   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0,    0x8c,
             1,    'g',  0x8a, 8,    0,    0,    0,    0,   0,    0,    0,    0x80, 'u',  '.'});
  EXPECT_EQ(out.str(), expected);
  std::string file = test::temp_path("scalars.pickle");
  test::write_file(file, out.str());
  EXPECT_EQ(run_python("import pickle, sys\n"
                       "v = pickle.load(open(sys.argv[1], 'rb'))\n"
                       "assert v == {'a': [1, 300, -1, 2**40], 'b': None, 'c': True, 'd': 1.5, 'e': (0, 0),\n"
                       "             'f': 2**64 - 1, 'g': -2**63}, v\n"
                       "assert type(v['e']) is tuple and list(v) == ['a', 'b', 'c', 'd', 'e', 'f', 'g']\n",
                       file),
            0);
}

TEST(PickleWriter, ListsAndDictsAreBatchedByAThousandItems) {
  std::ostringstream out;
  PickleWriter w(out);
  w.begin_list();
  for (int i = 0; i < 1001; ++i) w.integer(7);
  w.end_list();
  w.finish();
  std::string items;
  for (int i = 0; i < 1000; ++i) items += "K\x07";
  // MARK, 1,000 items, APPENDS; MARK, the last item, APPENDS.
  EXPECT_EQ(out.str(), bytes({0x80, 4, ']', '('}) + items + "e(K\x07" + "e.");

  std::ostringstream dict_out;
  PickleWriter d(dict_out);
  d.begin_dict();
  for (int i = 0; i < 1001; ++i) {
    d.key("k");
    d.integer(i % 2);
  }
  d.end_dict();
  d.finish();
  std::string pairs;
  for (int i = 0; i < 1000; ++i) pairs += std::string("\x8c\x01k", 3) + "K" + char(i % 2);
  EXPECT_EQ(dict_out.str(),
            bytes({0x80, 4, '}', '('}) + pairs + "u(" + std::string("\x8c\x01k", 3) + std::string("K\0", 2) + "u.");
  std::string file = test::temp_path("batched.pickle");
  test::write_file(file, out.str());
  EXPECT_EQ(run_python("import pickle, sys\nassert pickle.load(open(sys.argv[1], 'rb')) == [7] * 1001\n", file), 0);
}

TEST(PickleWriter, RememberedValueIsReferredToByTheMemo) {
  std::ostringstream out;
  PickleWriter w(out);
  w.begin_list();
  for (int i = 0; i < 2; ++i) {
    if (w.repeat_or_remember(42)) continue;
    w.begin_list();
    w.string("s");
    w.end_list();
  }
  w.string(std::string(300, 'x'));  // BINUNICODE: 300 bytes do not fit SHORT_BINUNICODE's length byte
  w.string("\xff");                 // not UTF-8: written as '?'
  w.end_list();
  w.finish();
  // The inner list closes (APPENDS) and is stored (BINPUT 0) before the outer list counts it; the second copy is
  // BINGET 0.
  EXPECT_EQ(out.str(), bytes({0x80, 4, ']', '(', ']', '(', 0x8c, 1, 's', 'e', 'q', 0, 'h', 0, 'X', 0x2c, 1, 0, 0}) +
                           std::string(300, 'x') + bytes({0x8c, 1, '?', 'e', '.'}));
  std::string file = test::temp_path("memo.pickle");
  test::write_file(file, out.str());
  EXPECT_EQ(run_python("import pickle, sys\n"
                       "v = pickle.load(open(sys.argv[1], 'rb'))\n"
                       "assert v == [['s'], ['s'], 'x' * 300, '?'] and v[0] is v[1], v\n",
                       file),
            0);
}

TEST(PickleWriter, MisuseIsALogicError) {
  std::ostringstream out;
  PickleWriter w(out);
  w.begin_dict();
  EXPECT_THROW(w.integer(1), std::logic_error);  // a value where the dict wants a key
  EXPECT_THROW(w.end_list(), std::logic_error);
  EXPECT_THROW(w.finish(), std::logic_error);
}

TEST(JsonWriter, EscapesAndRepeatsRememberedValues) {
  std::ostringstream out;
  JsonWriter w(out);
  w.begin_dict();
  w.key("a\"b");
  w.begin_list();
  for (int i = 0; i < 2; ++i) {
    if (w.repeat_or_remember(1)) continue;
    w.begin_dict();
    w.key("n");
    w.string("x\n\\");
    w.end_dict();
  }
  w.real(0.5);
  w.boolean(false);
  w.none();
  w.unsigned_integer(UINT64_MAX);
  w.begin_tuple();
  w.integer(-3);
  w.end_tuple();
  w.end_list();
  w.end_dict();
  w.finish();
  EXPECT_EQ(
      out.str(),
      "{\"a\\\"b\":[{\"n\":\"x\\u000a\\\\\"},{\"n\":\"x\\u000a\\\\\"},0.5,false,null,18446744073709551615,[-3]]}");
}

// ---- the snapshot ------------------------------------------------------------------------------------------

constexpr uint64_t kStartUnixNs = 1'700'000'000'000'000'000;
constexpr uint64_t kBaseUs = kStartUnixNs / 1000;
constexpr uint64_t kA = 0x7f0000000000, kB = 0x7f0000400000, kV = 0x7f1000000000;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kPython = uint64_t(1) << 63;

// Exports `trace` both ways; checks them with memory_viz_check.py (consistency, pickle == JSON); returns the JSON.
json export_snapshot(const TraceBuilder& b, const std::string& name) {
  const std::string trace = test::temp_path(name + ".mtrace"), pickle = test::temp_path(name + ".pickle"),
                    json_file = test::temp_path(name + ".json");
  test::write_file(trace, b.bytes());
  for (const std::string& file : {pickle, json_file}) {
    test::MemtraceRun r = test::run_memtrace_binary("export --format memory-viz " + trace + " -o " + file);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(std::system(("python3 " MEMORY_VIZ_CHECK_PY " " + pickle + " " + json_file).c_str()), 0);
  return json::parse(test::read_file(json_file));
}

json frames_train() { return json::array({{{"filename", "train.py"}, {"line", 10}, {"name", "main"}}}); }
json label(const std::string& text) { return {{"filename", "memtrace"}, {"line", 0}, {"name", text}}; }
json entry(const char* action, uint64_t addr, uint64_t size, uint64_t time_us, json frames) {
  return {{"action", action}, {"addr", addr},       {"size", size},
          {"stream", 0},      {"time_us", time_us}, {"frames", std::move(frames)}};
}
json block(uint64_t address, uint64_t size, bool live, json frames = json::array()) {
  return {{"address", address},
          {"size", size},
          {"requested_size", live ? size : 0},
          {"state", live ? "active_allocated" : "inactive"},
          {"frames", std::move(frames)}};
}
json counts(const char* ends_at, uint64_t end_us, uint64_t outside, uint64_t unknown_frees, uint64_t with_segment,
            uint64_t segments_overlapping) {
  return {{"ends_at", ends_at},
          {"ends_at_time_us", end_us},
          {"blocks_outside_segments", outside},
          {"blocks_overlapping", 0},
          {"frees_of_unknown_blocks", unknown_frees},
          {"blocks_allocated_again", 0},
          {"blocks_freed_with_segment", with_segment},
          {"segments_overlapping", segments_overlapping},
          {"segments_next_to_mappings", 0}};
}

TEST(MemoryViz, SegmentsTiledByLiveBlocksAndEntriesInEventOrder) {
  TraceBuilder b;
  b.start(1'000'000'000, kStartUnixNs);
  b.python_frame(1, "train.py", "main", 10);
  b.stack(7, {kPython | 1});
  // Every event 1 us after the one before. A 2 MiB cudaMalloc from train.py:10, two PyTorch blocks in it, the first
  // freed; a 1 MiB cuMemAlloc that never holds a block; then what the export leaves out: a free of a block never
  // allocated, a block outside every segment, a cudaMalloc overlapping the first segment. An OOM; the interpreter
  // finalizes; a free after that is not exported.
  b.event(test::driver_alloc(0, kA, 2 * kMiB, 1000, 7));
  b.event(test::torch_event(proto::ALLOC, 0, kA, 512, 512, 2 * kMiB, 1000, 7));
  b.event(test::torch_event(proto::ALLOC, 0, kA + 0x200, 1024, 1536, 2 * kMiB, 1000, 7));
  b.event(test::torch_event(proto::FREE, 0, kA, 512, 1024, 2 * kMiB, 1000));
  b.event(test::driver_alloc(0, kB, kMiB, 1000, 0, proto::CU_MEM_ALLOC));
  b.event(test::torch_event(proto::FREE, 0, 0x1234, 64, 1024, 2 * kMiB, 1000));
  b.event(test::torch_event(proto::ALLOC, 0, 0x100, 512, 1536, 2 * kMiB, 1000));
  b.event(test::driver_alloc(0, kA + 0x100, 4096, 1000));
  proto::Event oom = test::make_event(proto::OOM, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0, 1 << 30, 1000);
  oom.set_device_free_bytes(12345);
  b.event(oom);
  b.event(test::finalizing(1000));
  b.event(test::torch_event(proto::FREE, 0, kA + 0x200, 1024, 0, 2 * kMiB, 1000));
  b.end(11, 0).end_chunk();
  json s = export_snapshot(b, "tiled");

  json trace = json::array({
      entry("segment_alloc", kA, 2 * kMiB, kBaseUs + 1,
            json::array({label("[memtrace] cudaMalloc: other"), frames_train()[0]})),
      entry("alloc", kA, 512, kBaseUs + 2, frames_train()),
      entry("alloc", kA + 0x200, 1024, kBaseUs + 3, frames_train()),
      entry("free_requested", kA, 512, kBaseUs + 4, frames_train()),
      entry("free_completed", kA, 512, kBaseUs + 4, frames_train()),
      entry("segment_alloc", kB, kMiB, kBaseUs + 5, json::array({label("[memtrace] cuMemAlloc: other")})),
      {{"action", "oom"},
       {"device_free", 12345},
       {"size", 1 << 30},
       {"stream", 0},
       {"time_us", kBaseUs + 9},
       {"frames", json::array()}},
  });
  EXPECT_EQ(s["device_traces"], json::array({trace}));
  json segment_a = {{"device", 0},
                    {"address", kA},
                    {"total_size", 2 * kMiB},
                    {"allocated_size", 1024},
                    {"active_size", 1024},
                    {"requested_size", 1024},
                    {"stream", 0},
                    {"segment_type", "small"},
                    {"segment_pool_id", {0, 0}},
                    {"is_expandable", false},
                    {"frames", json::array({label("[memtrace] cudaMalloc: PyTorch allocator"), frames_train()[0]})},
                    {"blocks", json::array({block(kA, 512, false), block(kA + 512, 1024, true, frames_train()),
                                            block(kA + 1536, 2 * kMiB - 1536, false)})}};
  json segment_b = {{"device", 0},
                    {"address", kB},
                    {"total_size", kMiB},
                    {"allocated_size", 0},
                    {"active_size", 0},
                    {"requested_size", 0},
                    {"stream", 0},
                    {"segment_type", "other"},
                    {"segment_pool_id", {0, 0}},
                    {"is_expandable", false},
                    {"frames", json::array({label("[memtrace] cuMemAlloc: other")})},
                    {"blocks", json::array({block(kB, kMiB, false)})}};
  EXPECT_EQ(s["segments"], json::array({segment_a, segment_b}));
  EXPECT_EQ(s["memtrace"], counts("python_finalizing", kBaseUs + 10, 1, 1, 0, 1));
}

TEST(MemoryViz, BlocksOfAFreedSegmentAreFreedFirstAndMappingsJoinIntoExpandableSegments) {
  TraceBuilder b;
  b.start(1'000'000'000, kStartUnixNs);
  // A cudaFree of a segment that still holds a block; then an expandable segment: a 4 MiB cuMemCreate handle
  // mapped twice, 2 MiB each, side by side; a 2 MiB block across both mappings; the second mapping unmapped under
  // it; a 1 MiB block in the first. The trace ends without finalizing.
  b.event(test::driver_alloc(0, kA, 2 * kMiB, 1000));
  b.event(test::torch_event(proto::ALLOC, 0, kA, 512, 512, 2 * kMiB, 1000));
  b.event(test::driver_free(0, kA, 1000));
  b.event(test::driver_alloc(0, 0x55, 4 * kMiB, 1000, 0, proto::CU_MEM_CREATE));
  for (uint64_t page : {kV, kV + 2 * kMiB}) {
    proto::Event map = test::make_event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, 0, page, 2 * kMiB, 1000);
    map.set_handle(0x55);
    b.event(map);
  }
  b.event(test::torch_event(proto::ALLOC, 0, kV + kMiB, 2 * kMiB, 2 * kMiB, 4 * kMiB, 1000));
  b.event(test::make_event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, 0, kV + 2 * kMiB, 2 * kMiB, 1000));
  b.event(test::torch_event(proto::ALLOC, 0, kV, kMiB, kMiB, 2 * kMiB, 1000));
  b.end(9, 0).end_chunk();
  json s = export_snapshot(b, "expandable");

  json none = json::array();
  json trace = json::array({
      entry("segment_alloc", kA, 2 * kMiB, kBaseUs + 1, json::array({label("[memtrace] cudaMalloc: other")})),
      entry("alloc", kA, 512, kBaseUs + 2, none),
      entry("free_requested", kA, 512, kBaseUs + 3, none),
      entry("free_completed", kA, 512, kBaseUs + 3, none),
      entry("segment_free", kA, 2 * kMiB, kBaseUs + 3,
            json::array({label("[memtrace] cudaMalloc: PyTorch allocator")})),
      entry("segment_map", kV, 2 * kMiB, kBaseUs + 5, json::array({label("[memtrace] cuMemMap: other")})),
      entry("segment_map", kV + 2 * kMiB, 2 * kMiB, kBaseUs + 6, json::array({label("[memtrace] cuMemMap: other")})),
      entry("alloc", kV + kMiB, 2 * kMiB, kBaseUs + 7, none),
      entry("free_requested", kV + kMiB, 2 * kMiB, kBaseUs + 8, none),
      entry("free_completed", kV + kMiB, 2 * kMiB, kBaseUs + 8, none),
      entry("segment_unmap", kV + 2 * kMiB, 2 * kMiB, kBaseUs + 8,
            json::array({label("[memtrace] cuMemMap: PyTorch allocator")})),
      entry("alloc", kV, kMiB, kBaseUs + 9, none),
  });
  EXPECT_EQ(s["device_traces"], json::array({trace}));
  json segment = {{"device", 0},
                  {"address", kV},
                  {"total_size", 2 * kMiB},
                  {"allocated_size", kMiB},
                  {"active_size", kMiB},
                  {"requested_size", kMiB},
                  {"stream", 0},
                  {"segment_type", "large"},
                  {"segment_pool_id", {0, 0}},
                  {"is_expandable", true},
                  {"frames", json::array({label("[memtrace] cuMemMap: PyTorch allocator")})},
                  {"blocks", json::array({block(kV, kMiB, true), block(kV + kMiB, kMiB, false)})}};
  EXPECT_EQ(s["segments"], json::array({segment}));
  EXPECT_EQ(s["memtrace"], counts("end_of_trace", kBaseUs + 9, 0, 0, 2, 0));
}

TEST(MemoryViz, EachDeviceHasItsOwnListAndAFreeOnAnotherDeviceFindsItsSegment) {
  TraceBuilder b;
  b.start(1'000'000'000, kStartUnixNs);
  // A segment and a block on device 1; cudaFree called with device 0 current (the event says device 0) frees it.
  b.event(test::driver_alloc(1, kA, 2 * kMiB, 1000));
  b.event(test::torch_event(proto::ALLOC, 1, kA, 512, 512, 2 * kMiB, 1000));
  b.event(test::torch_event(proto::FREE, 1, kA, 512, 0, 2 * kMiB, 1000));
  b.event(test::driver_free(0, kA, 1000));
  b.end(4, 0).end_chunk();
  json s = export_snapshot(b, "devices");
  json none = json::array();
  json device1 = json::array({
      entry("segment_alloc", kA, 2 * kMiB, kBaseUs + 1, json::array({label("[memtrace] cudaMalloc: other")})),
      entry("alloc", kA, 512, kBaseUs + 2, none),
      entry("free_requested", kA, 512, kBaseUs + 3, none),
      entry("free_completed", kA, 512, kBaseUs + 3, none),
      entry("segment_free", kA, 2 * kMiB, kBaseUs + 4,
            json::array({label("[memtrace] cudaMalloc: PyTorch allocator")})),
  });
  EXPECT_EQ(s["device_traces"], json::array({json::array(), device1}));
  EXPECT_EQ(s["segments"], json::array());
}

TEST(MemoryViz, PoolBlocksAreSegmentsAndMayHoldPyTorchBlocks) {
  TraceBuilder b;
  b.start(1'000'000'000, kStartUnixNs);
  // PyTorch's cudaMallocAsync backend: each block is a stream-ordered pool block (stream 0x10) that the allocator
  // also reports as its own block; freed in the same order.
  proto::Event pool = test::make_event(proto::ALLOC, proto::LAYER_BLOCK, proto::CUDA_MALLOC_ASYNC, 0, kA, kMiB, 1000);
  pool.set_stream(0x10);
  b.event(pool);
  b.event(test::torch_event(proto::ALLOC, 0, kA, kMiB, kMiB, 0, 1000));
  b.event(test::torch_event(proto::FREE, 0, kA, kMiB, 0, 0, 1000));
  proto::Event pool_free = test::make_event(proto::FREE, proto::LAYER_BLOCK, proto::CUDA_FREE_ASYNC, 0, kA, 0, 1000);
  pool_free.set_stream(0x10);
  b.event(pool_free);
  b.end(4, 0).end_chunk();
  json s = export_snapshot(b, "pool");
  json none = json::array();
  json pool_label = json::array({label("[memtrace] cudaMallocAsync: stream-ordered pool")});
  json segment_alloc = entry("segment_alloc", kA, kMiB, kBaseUs + 1, pool_label);
  segment_alloc["stream"] = 0x10;
  json segment_free = entry("segment_free", kA, kMiB, kBaseUs + 4, pool_label);
  segment_free["stream"] = 0x10;
  EXPECT_EQ(s["device_traces"],
            json::array({json::array({segment_alloc, entry("alloc", kA, kMiB, kBaseUs + 2, none),
                                      entry("free_requested", kA, kMiB, kBaseUs + 3, none),
                                      entry("free_completed", kA, kMiB, kBaseUs + 3, none), segment_free})}));
  EXPECT_EQ(s["memtrace"], counts("end_of_trace", kBaseUs + 4, 0, 0, 0, 0));
}

TEST(MemoryViz, HostileEventSoupStaysConsistent) {
  // Events no tracer writes in this order: segments, mappings, pool blocks and PyTorch blocks on a few addresses,
  // sizes that overlap and wrap, frees of anything, context destroys, on devices -1..2. The export must succeed and
  // stay consistent (memory_viz_check.py) whatever it leaves out.
  uint64_t outside = 0, overlapping = 0, next_to_mappings = 0, with_segment = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    TraceBuilder b;
    b.start(1'000'000'000, kStartUnixNs);
    uint64_t state = seed;
    auto next = [&](uint64_t n) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (state >> 33) % n;
    };
    const uint64_t sizes[] = {0, 512, kMiB / 2, kMiB, 2 * kMiB, UINT64_MAX - 100};
    b.event(test::driver_alloc(0, 0x66, 8 * kMiB, 1000, 0, proto::CU_MEM_CREATE));
    for (int i = 0; i < 2000; ++i) {
      int32_t device = int32_t(next(4)) - 1;
      uint64_t address = kA + next(16) * kMiB / 2;
      uint64_t size = sizes[next(6)];
      proto::Event e;
      switch (next(10)) {
        case 0: e = test::driver_alloc(device, address, size, 1000); break;
        case 1: e = test::driver_free(device, address, 1000); break;
        case 2:
        case 3: e = test::torch_event(proto::ALLOC, device, address, size, 0, 0, 1000); break;
        case 4: e = test::torch_event(proto::FREE, device, address, size, 0, 0, 1000); break;
        case 5:
          e = test::make_event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, device, address, size);
          e.set_handle(0x66);
          break;
        case 6:
          e = test::make_event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, device, address, size);
          break;
        case 7:
          e = test::make_event(proto::ALLOC, proto::LAYER_BLOCK, proto::CUDA_MALLOC_ASYNC, device, address, size);
          break;
        case 8:
          e = test::make_event(proto::FREE, proto::LAYER_BLOCK, proto::CUDA_FREE_ASYNC, device, address, size);
          break;
        default:
          e = test::make_event(proto::CONTEXT_DESTROY, proto::LAYER_UNKNOWN, proto::CU_CTX_DESTROY, device, 0, 0);
      }
      b.event(e);
    }
    b.end(2001, 0).end_chunk();
    json s = export_snapshot(b, "hostile" + std::to_string(seed));
    EXPECT_EQ(s["device_traces"].size(), 3u);
    outside += s["memtrace"]["blocks_outside_segments"].get<uint64_t>();
    overlapping += s["memtrace"]["segments_overlapping"].get<uint64_t>();
    next_to_mappings += s["memtrace"]["segments_next_to_mappings"].get<uint64_t>();
    with_segment += s["memtrace"]["blocks_freed_with_segment"].get<uint64_t>();
  }
  // The soup reaches each rule.
  EXPECT_GT(outside, 0u);
  EXPECT_GT(overlapping, 0u);
  EXPECT_GT(next_to_mappings, 0u);
  EXPECT_GT(with_segment, 0u);
}

TEST(MemoryViz, FormatIsListedAndABadTraceLeavesNoFile) {
  const std::string out = test::temp_path("bad.pickle"), junk = test::temp_path("junk.mtrace");
  test::write_file(junk, "not a trace");
  test::MemtraceRun r = test::run_memtrace_binary("export --format memory-viz " + junk + " -o " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(junk), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(out).good());
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// An attached trace (attach_traces.h): the live set at attach is written as entries at time 0, so that the free of
// a block allocated before attach finds it (no free of an unknown block).
TEST(MemoryViz, AllocationsLiveAtAttachExistFromTimeZero) {
  json s = export_snapshot(test::attached_torch_trace(), "attached");
  const uint64_t t0 = test::kAttachUnixNs / 1000;
  const uint64_t S = 0x10000000, A = 0x10000000, B = 0x10100000, C = 0x10300000;
  json none = json::array();
  json train = json::array({{{"filename", "train.py"}, {"line", 42}, {"name", "train_step"}}});
  json trace = json::array({
      entry("segment_alloc", S, 8 * kMiB, t0,
            json::array({label("[memtrace] cudaMalloc: other")})),  // as for any segment
      entry("alloc", A, kMiB, t0, none),
      entry("alloc", B, 2 * kMiB, t0, none),
      entry("free_requested", A, kMiB, t0 + 1000, none),
      entry("free_completed", A, kMiB, t0 + 1000, none),
      entry("alloc", C, kMiB, t0 + 2000, train),
  });
  EXPECT_EQ(s["device_traces"], json::array({trace}));
  EXPECT_EQ(s["memtrace"], counts("end_of_trace", t0 + 2000, 0, 0, 0, 0));
}

}  // namespace
}  // namespace memtrace
