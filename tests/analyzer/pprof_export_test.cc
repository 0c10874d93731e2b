// `memtrace export --format pprof` (export/pprof.h): the output gunzipped, decoded with export/profile.proto and
// checked field by field, on the trace of export_traces.h (pprof_export_trace: its values worked out there).
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attach_traces.h"
#include "export_traces.h"
#include "profile.pb.h"

namespace memtrace {
namespace {

namespace pp = pprof_proto;
using test::kMiB;

std::string gunzip(const std::string& bytes) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);  // gzip only: the format pprof reads
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  std::string out;
  char buffer[4096];
  int status;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
  } while (status == Z_OK);
  inflateEnd(&z);
  EXPECT_EQ(status, Z_STREAM_END);
  return out;
}

pp::Profile export_pprof(const std::string& trace_bytes, const std::string& name) {
  const std::string trace = test::temp_path(name + ".mtrace"), out = test::temp_path(name + ".pb.gz");
  test::write_file(trace, trace_bytes);
  test::MemtraceRun r = test::run_memtrace_binary("export --format pprof " + trace + " -o " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
  std::ifstream in(out, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  pp::Profile profile;
  EXPECT_TRUE(profile.ParseFromString(gunzip(bytes)));
  return profile;
}

TEST(PprofExport, SampleTypesStacksAndLabels) {
  pp::Profile p = export_pprof(test::pprof_export_trace(), "pprof");
  const std::vector<std::string> strings = {
      "",
      "alloc_objects",
      "count",
      "alloc_space",
      "bytes",
      "exit_objects",
      "exit_space",
      "inuse_objects",
      "inuse_space",
      "train.py:20 step",
      "train.py",
      "train.py:10 main",
      "train.py:21 step",
      "device",
      "cuda:0",
      "phase",
      "forward",
      "backward",
      "memtrace: inuse_* at each device's peak allocated, exit_* live at exit (leak candidates), alloc_* every "
      "allocation of the trace"};
  ASSERT_EQ(std::vector<std::string>(p.string_table().begin(), p.string_table().end()), strings);
  auto str = [&](int64_t i) { return p.string_table(int(i)); };
  ASSERT_EQ(p.sample_type_size(), 6);
  std::vector<std::string> types;
  for (const pp::ValueType& t : p.sample_type()) types.push_back(str(t.type()) + "/" + str(t.unit()));
  EXPECT_EQ(types, (std::vector<std::string>{"alloc_objects/count", "alloc_space/bytes", "exit_objects/count",
                                             "exit_space/bytes", "inuse_objects/count", "inuse_space/bytes"}));
  EXPECT_EQ(str(p.default_sample_type()), "inuse_space");

  // Functions: one per frame label; locations: one per (function, line), leaf first in the samples.
  ASSERT_EQ(p.function_size(), 3);
  const char* function_names[] = {"train.py:20 step", "train.py:10 main", "train.py:21 step"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.function(i).id(), uint64_t(i + 1));
    EXPECT_EQ(str(p.function(i).name()), function_names[i]);
    EXPECT_EQ(p.function(i).system_name(), 0);  // none: pprof would simplify the name (pprof.cc)
    EXPECT_EQ(str(p.function(i).filename()), "train.py");
    EXPECT_EQ(p.function(i).start_line(), 0);
  }
  ASSERT_EQ(p.location_size(), 3);
  const int64_t lines[] = {20, 10, 21};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.location(i).id(), uint64_t(i + 1));
    EXPECT_EQ(p.location(i).mapping_id(), 0u);
    ASSERT_EQ(p.location(i).line_size(), 1);
    EXPECT_EQ(p.location(i).line(0).function_id(), uint64_t(i + 1));
    EXPECT_EQ(p.location(i).line(0).line(), lines[i]);
  }

  // Stack 1 in forward (e1: b1; e4: b3): allocated 2, 6 MiB; at exit b1 and b3, 2, 6 MiB; at the peak b1, 4 MiB.
  // Stack 2 in backward (e2: b2): allocated 1, 8 MiB; freed before exit; at the peak 1, 8 MiB.
  ASSERT_EQ(p.sample_size(), 2);
  auto describe = [&](const pp::Sample& s) {
    std::string text = "at";
    for (uint64_t id : s.location_id()) text += " " + std::to_string(id);
    text += ":";
    for (int64_t v : s.value()) text += " " + std::to_string(v);
    for (const pp::Label& l : s.label()) text += " " + str(l.key()) + "=" + str(l.str());
    return text;
  };
  EXPECT_EQ(describe(p.sample(0)), "at 1 2: 2 " + std::to_string(6 * kMiB) + " 2 " + std::to_string(6 * kMiB) + " 1 " +
                                       std::to_string(4 * kMiB) + " device=cuda:0 phase=forward");
  EXPECT_EQ(describe(p.sample(1)), "at 3 2: 1 " + std::to_string(8 * kMiB) + " 0 0 1 " + std::to_string(8 * kMiB) +
                                       " device=cuda:0 phase=backward");
  EXPECT_EQ(p.comment_size(), 1);
  EXPECT_EQ(str(p.comment(0)), strings.back());
  EXPECT_EQ(p.time_nanos(), 0);         // the builder's TraceStart has start_unix_ns 0
  EXPECT_EQ(p.duration_nanos(), 9000);  // the last event, at 9 us
}

// An attached trace (attach_traces.h): its peak is at attach (A + B, before e0 frees A), under one frame of their
// own; at exit B is still live, beside C (stack 10), the trace's one allocation.
TEST(PprofExport, WhatWasLiveAtAttachIsOneFrameOfItsOwn) {
  pp::Profile p = export_pprof(test::attached_torch_trace().bytes(), "pprof_attach");
  auto str = [&](int64_t i) { return p.string_table(int(i)); };
  ASSERT_EQ(p.function_size(), 2);
  EXPECT_EQ(str(p.function(0).name()), "[allocated before attach]");
  EXPECT_EQ(str(p.function(1).name()), "train.py:42 train_step");
  ASSERT_EQ(p.sample_size(), 2);
  auto values = [&](const pp::Sample& s) {
    std::vector<int64_t> v(s.value().begin(), s.value().end());
    v.insert(v.begin(), int64_t(s.location_id(0)));
    return v;
  };
  // location; alloc objects, bytes; exit objects, bytes; inuse objects, bytes
  EXPECT_EQ(values(p.sample(0)), (std::vector<int64_t>{1, 0, 0, 1, 2 * kMiB, 2, 3 * kMiB}));
  EXPECT_EQ(values(p.sample(1)), (std::vector<int64_t>{2, 1, kMiB, 1, kMiB, 0, 0}));
  // Blocks not listed one by one: bytes at the peak (3 MiB at attach), no allocation to count; none left at exit.
  // D (no stack) is the trace's: a sample of its own.
  pp::Profile u = export_pprof(test::attached_unlisted_blocks_trace().bytes(), "pprof_attach_unlisted");
  std::vector<std::string> seen;
  for (const pp::Sample& sample : u.sample()) {
    const pp::Location& location = u.location(int(sample.location_id(0)) - 1);
    std::string text = u.string_table(int(u.function(int(location.line(0).function_id()) - 1).name()));
    for (int64_t v : sample.value()) text += " " + std::to_string(v);
    seen.push_back(text);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"[no stack] 1 524288 1 524288 0 0",
                                            "[allocated before attach] 0 0 0 0 0 " + std::to_string(3 * kMiB)}));
}

TEST(PprofExport, NoIterationsNoPhaseLabel) {
  test::TraceBuilder b;
  b.start();
  b.event(test::driver_alloc(1, 0x1000, 3 * kMiB, 1000, 0));
  b.end(1, 0).end_chunk();
  pp::Profile p = export_pprof(b.bytes(), "pprof_plain");
  ASSERT_EQ(p.sample_size(), 1);
  ASSERT_EQ(p.sample(0).location_id_size(), 1);
  EXPECT_EQ(p.string_table(int(p.function(0).name())), "[no stack]");
  EXPECT_EQ(std::vector<int64_t>(p.sample(0).value().begin(), p.sample(0).value().end()),
            (std::vector<int64_t>{1, int64_t(3 * kMiB), 1, int64_t(3 * kMiB), 1, int64_t(3 * kMiB)}));
  ASSERT_EQ(p.sample(0).label_size(), 1);
  EXPECT_EQ(p.string_table(int(p.sample(0).label(0).key())), "device");
  EXPECT_EQ(p.string_table(int(p.sample(0).label(0).str())), "cuda:1");
}

}  // namespace
}  // namespace memtrace
