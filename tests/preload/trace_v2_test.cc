// Trace formats v2 and v3 end to end: what the tracer's Event encoder (preload/record/event_encoder.h, version 3:
// allocator totals and sticky fields left out) writes, the analyzer's reader (analyzer/read/trace_reader.cc,
// derived_fields.h) reads back as the Events a version-1 trace of the same run gives: times within 1 us,
// everything else identical.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "read/trace_reader.h"
#include "record/event_encoder.h"
#include "trace_size_reencode.h"

namespace memtrace {
namespace {

constexpr uint64_t kStartNs = 1'000'000'000;
constexpr uint64_t kMiB = 1 << 20;

std::string temp_file(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  std::filesystem::path base = std::filesystem::path(dir ? dir : "/tmp") / "memtrace_trace_v2_test";
  std::filesystem::create_directories(base);
  return (base / name).string();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Appends Record.`kind` = `inner`, preceded by its length, as preload/record/recorder_state.h does.
void append_record(uint32_t kind, const ProtoWriter& inner, std::string* records) {
  uint8_t body[512], length[10];
  ProtoWriter record(body, body + sizeof body);
  record.message(kind, inner);
  ProtoWriter prefix(length, length + sizeof length);
  prefix.raw_varint(record.size());
  records->append(reinterpret_cast<char*>(length), prefix.size());
  records->append(reinterpret_cast<char*>(body), record.size());
}

std::string start_record(uint64_t start_ns) {
  uint8_t buf[32];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(5, start_ns);
  std::string records;
  append_record(field::kStart, w, &records);
  return records;
}

// A trace file of format `version` whose chunks hold `chunks` (records as the recorder appends them).
std::string trace_file(uint32_t version, const std::vector<std::string>& chunks) {
  std::string file = reencode::header_frame(version);
  for (const std::string& c : chunks) file += reencode::compress_chunk(c);
  return file;
}

struct Read {
  std::vector<proto::Event> events;
  std::vector<proto::TraceEnd> ends;
  uint64_t start_ns = 0;
};

Read read(const std::string& name, const std::string& bytes) {
  std::string path = temp_file(name);
  write_file(path, bytes);
  Read out;
  read_trace(path, [&](const proto::Record& r) {
    if (r.has_start()) out.start_ns = r.start().start_monotonic_ns();
    if (r.has_event()) out.events.push_back(r.event());
    if (r.has_end()) out.ends.push_back(r.end());
  });
  return out;
}

MemoryEvent torch(EventKind kind, int32_t device, uint64_t size, uint64_t allocated, uint64_t reserved) {
  return MemoryEvent{.kind = kind,
                     .layer = Layer::kBlock,
                     .api = Api::kTorchAllocator,
                     .device = device,
                     .address = 0x1000,
                     .size = size,
                     .allocator_allocated_bytes = allocated,
                     .allocator_reserved_bytes = reserved};
}

// The sequence of tests/preload/event_encoder_test.cc (a lost event, a chunk boundary, two devices) as the
// recorder writes it, in trace format version 3: the file's bytes.
std::string hand_made_trace() {
  struct Step {
    MemoryEvent event;
    uint64_t t_ns;  // after kStartNs
  };
  const uint64_t r4 = 4 * kMiB;
  const MemoryEvent segment{.kind = EventKind::kAlloc,
                            .layer = Layer::kDriver,
                            .api = Api::kCudaMalloc,
                            .device = 0,
                            .address = 0x7f0000000000,
                            .size = 2 * kMiB};
  const std::vector<Step> first_chunk = {
      {torch(EventKind::kAlloc, 0, 512, 512, 2 * kMiB), 1'500},    // 1 us
      {torch(EventKind::kAlloc, 0, 1024, 1536, 2 * kMiB), 2'999},  // 2 us: both derived
      {torch(EventKind::kFree, 0, 512, 1024, 2 * kMiB), 3'000},    // 3 us: both derived
      {torch(EventKind::kAlloc, 0, 4096, 5120, r4), 10'000},       // 10 us: allocated derived
  };
  const std::vector<Step> after_loss = {
      {torch(EventKind::kFree, 0, 4096, 1280, r4), 12'345},  // 12 us, both written
  };
  const std::vector<Step> second_chunk = {
      {torch(EventKind::kAlloc, 0, 256, 1536, r4), 12'999},          // 12 us
      {segment, 1'000'000},                                          // 1000 us
      {torch(EventKind::kAlloc, 1, 100, 100, 2 * kMiB), 1'000'500},  // 1000 us, device 1
      {torch(EventKind::kAlloc, 0, 64, 1600, r4), 1'002'000},        // 1002 us: both derived
      {torch(EventKind::kFree, 0, 64, 1500, r4), 1'003'000},         // 1003 us: allocated written
      {torch(EventKind::kOom, 0, 1ull << 30, 1500, r4), 1'004'000},  // 1004 us: both derived
  };
  // The thread of each event (the recorder passes gettid()): 7, then 8 from the OOM on.
  auto tid_of = [](uint64_t t_ns) -> uint32_t { return t_ns >= 1'004'000 ? 8 : 7; };
  EventEncoder enc;
  enc.begin(kStartNs);
  auto append = [&](const std::vector<Step>& steps, std::string* records) {
    for (const Step& s : steps) {
      uint8_t buf[23 * 12];
      ProtoWriter w(buf, buf + sizeof buf);
      EventEncoder::Pending p = enc.encode_event(s.event, kStartNs + s.t_ns, tid_of(s.t_ns), 0, w);
      append_record(field::kEvent, w, records);
      enc.commit(p);
    }
  };
  std::string chunk1 = start_record(kStartNs);
  append(first_chunk, &chunk1);
  enc.event_lost();
  append(after_loss, &chunk1);
  enc.start_chunk();
  std::string chunk2;
  append(second_chunk, &chunk2);
  uint8_t buf[64];
  ProtoWriter end(buf, buf + sizeof buf);
  end.uint(1, 11);
  end.sint(6, enc.end_time_delta_us(kStartNs + 2'000'999));  // 2000 us: 996 after the OOM
  append_record(field::kEnd, end, &chunk2);
  return trace_file(3, {chunk1, chunk2});
}

// hand_made_trace() read back: each time_delta_ns is 1000 x the record's microseconds, each TORCH_ALLOCATOR
// event has both totals, the ones left out derived, and each event its layer, api, tid, device and stream,
// the ones left out (repeated) filled in from the previous event.
TEST(TraceV2, HandMadeSequenceReadsBackWithEveryTotal) {
  const uint64_t r4 = 4 * kMiB;
  Read r = read("hand-made.mtrace", hand_made_trace());
  ASSERT_EQ(r.events.size(), 11u);
  // Microseconds: 1, 2, 3, 10, 12, 12, 1000, 1000, 1002, 1003, 1004; deltas x 1000 ns.
  const std::vector<int64_t> delta_ns = {1000, 1000, 1000, 7000, 2000, 0, 988000, 0, 2000, 1000, 1000};
  // The totals every event had (what version 1 wrote), driver event 0 / 0.
  const std::vector<uint64_t> allocated = {512, 1536, 1024, 5120, 1280, 1536, 0, 100, 1600, 1500, 1500};
  const std::vector<uint64_t> reserved = {2 * kMiB, 2 * kMiB, 2 * kMiB, r4, r4, r4, 0, 2 * kMiB, r4, r4, r4};
  for (size_t i = 0; i < r.events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(r.events[i].time_delta_ns(), delta_ns[i]);
    EXPECT_EQ(r.events[i].allocator_allocated_bytes(), allocated[i]);
    EXPECT_EQ(r.events[i].allocator_reserved_bytes(), reserved[i]);
  }
  // Layer, api, device and tid as each event had them, whether its record wrote them or left them to the
  // reader: events 0-5 and 7-10 PyTorch blocks, 6 the driver allocation; 7 on device 1; 10 on thread 8.
  for (size_t i = 0; i < r.events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(r.events[i].layer(), i == 6 ? proto::LAYER_DRIVER : proto::LAYER_BLOCK);
    EXPECT_EQ(r.events[i].api(), i == 6 ? proto::CUDA_MALLOC : proto::TORCH_ALLOCATOR);
    EXPECT_EQ(r.events[i].device(), i == 7 ? 1 : 0);
    EXPECT_EQ(r.events[i].tid(), i == 10 ? 8u : 7u);
    EXPECT_EQ(r.events[i].stream(), 0u);
  }
  ASSERT_EQ(r.ends.size(), 1u);
  EXPECT_EQ(r.ends[0].time_delta_ns(), 996000);
}

// A sink that declares it does not read allocator_allocated_bytes (the analyses' replay) gets the reserved
// totals derived as before, and the allocated total only where the file wrote it: hand_made_trace()'s events 0
// (the first), 4 (after the lost event), 5 (the second chunk's first) and 7 (device 1's first) write both
// totals, 9 allocated alone (1500 is not 1600 - 64); 1, 2, 3, 8 and 10 leave allocated out (derivable), and 6
// is a driver event without totals.
struct ReservedOnlySink {
  static constexpr bool kReadsAllocatorAllocatedBytes = false;
  std::vector<EventFields> events;
  void on_event(const EventFields& e) { events.push_back(e); }
  void on_record(const proto::Record&) {}
};

TEST(TraceV2, ASinkThatDoesNotReadAllocatedGetsReservedDerivedAndAllocatedAsWritten) {
  const uint64_t r4 = 4 * kMiB;
  std::string path = temp_file("hand-made-reserved-only.mtrace");
  write_file(path, hand_made_trace());
  ReservedOnlySink sink;
  read_trace(path, sink);
  ASSERT_EQ(sink.events.size(), 11u);
  const std::vector<uint64_t> reserved = {2 * kMiB, 2 * kMiB, 2 * kMiB, r4, r4, r4, 0, 2 * kMiB, r4, r4, r4};
  const std::vector<bool> allocated_written = {true, false, false, false, true, true, false, true, false, true, false};
  const std::vector<uint64_t> allocated = {512, 0, 0, 0, 1280, 1536, 0, 100, 0, 1500, 0};
  for (size_t i = 0; i < sink.events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(sink.events[i].allocator_reserved_bytes(), reserved[i]);
    EXPECT_EQ(sink.events[i].has_allocator_allocated_bytes(), allocated_written[i]);
    if (allocated_written[i]) EXPECT_EQ(sink.events[i].allocator_allocated_bytes(), allocated[i]);
  }
}

// Version 1 has no derivation: a total left out is 0 (proto3's default), even where version 2 would
// derive it. Here PyTorch freed its last block and released its cache: allocated 0, reserved 0.
TEST(TraceV2, VersionOneTotalsLeftOutAreZero) {
  std::string records = start_record(kStartNs);
  for (const auto& [kind, allocated, reserved] :
       std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>{{1, 512, 2 * kMiB}, {2, 0, 0}}) {
    uint8_t buf[64];
    ProtoWriter w(buf, buf + sizeof buf);
    w.uint(1, kind);
    w.uint(3, static_cast<uint64_t>(Api::kTorchAllocator));
    w.sint(4, 1500);
    w.uint(9, 512);
    w.uint(12, allocated);  // version 1: a zero is not written
    w.uint(13, reserved);
    append_record(field::kEvent, w, &records);
  }
  Read r = read("v1-zero-totals.mtrace", trace_file(1, {records}));
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].time_delta_ns(), 1500);
  EXPECT_EQ(r.events[1].allocator_allocated_bytes(), 0u);
  EXPECT_EQ(r.events[1].allocator_reserved_bytes(), 0u);
}

// A version-2 TORCH_ALLOCATOR event that leaves a total out with nothing before it to derive from is a
// damaged file: one error naming the record.
TEST(TraceV2, TotalLeftOutWithNothingToDeriveFromIsAnError) {
  std::string records = start_record(kStartNs);
  uint8_t buf[64];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(EventKind::kAlloc));
  w.uint(3, static_cast<uint64_t>(Api::kTorchAllocator));
  w.sint(6, 2);
  w.uint(9, 512);
  w.optional_uint(13, true, 0);  // reserved written (0), allocated left out
  append_record(field::kEvent, w, &records);
  std::string file = trace_file(2, {records});
  try {
    read("underived.mtrace", file);
    ADD_FAILURE() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_STREQ(e.what(),
                 "record 1 of a chunk: TORCH_ALLOCATOR event of device 2 leaves an allocator total to be derived, "
                 "but no earlier TORCH_ALLOCATOR event of that device gives one");
    EXPECT_EQ(e.byte_offset(), 24u);  // the first chunk, right after the 24-byte header frame
  }
}

// The real training loop of examples/train_leak.mtrace (version 1, H200), rewritten in version 3 chunk
// for chunk by the tracer's encoder, reads back as the same Events: every field but the time identical,
// and each event's time since the start (the sum of the deltas) the version-1 time rounded down to the
// microsecond: 0 <= t_v1 - t_v2 < 1000 ns. With every 7th event left out (what a full buffer does) the
// kept events still read back with the totals version 1 has for them.
TEST(TraceV2, RealTraceReadsBackAsVersionOne) {
  Read v1 = read("train_leak.v1.mtrace", read_file(MEMTRACE_EXAMPLE_TRACE));
  ASSERT_GT(v1.events.size(), 16000u);
  reencode::Chunks chunks = reencode::split_chunks(read_file(MEMTRACE_EXAMPLE_TRACE));
  ASSERT_EQ(chunks.version, 1u);
  ASSERT_GT(chunks.records.size(), 1u);  // chunk boundaries are part of what is checked
  for (uint64_t drop_every : {0, 7}) {
    SCOPED_TRACE("drop_every " + std::to_string(drop_every));
    reencode::Reencoder reencoder(drop_every);
    std::vector<std::string> v2_chunks;
    for (const std::string& c : chunks.records) v2_chunks.push_back(reencoder.chunk(c));
    Read v2 = read("train_leak.v3.mtrace", trace_file(3, v2_chunks));
    EXPECT_EQ(v2.start_ns, v1.start_ns);
    std::vector<const proto::Event*> kept;
    std::vector<int64_t> kept_times;  // ns since the start, version 1
    int64_t t1 = 0;
    for (size_t i = 0; i < v1.events.size(); ++i) {
      t1 += v1.events[i].time_delta_ns();
      if (drop_every && (i + 1) % drop_every == 0) continue;
      kept.push_back(&v1.events[i]);
      kept_times.push_back(t1);
    }
    ASSERT_EQ(v2.events.size(), kept.size());
    int64_t t2 = 0;
    size_t torch_events = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      proto::Event a = *kept[i];
      proto::Event b = v2.events[i];
      t2 += b.time_delta_ns();
      ASSERT_GE(kept_times[i] - t2, 0) << "event " << i;
      ASSERT_LT(kept_times[i] - t2, 1000) << "event " << i;
      torch_events += a.api() == proto::TORCH_ALLOCATOR;
      // Compared as version 1 holds them: time aside, field by field.
      for (proto::Event* e : {&a, &b}) {
        e->clear_time_delta_ns();
        e->clear_time_delta_us();
      }
      // Presence aside (version 1 leaves a zero out, a reader may mark a filled-in field present): the
      // sticky fields compared by value below, as part of the whole record.
      for (proto::Event* e : {&a, &b}) {
        e->set_layer(e->layer());
        e->set_api(e->api());
        e->set_tid(e->tid());
        e->set_device(e->device());
        e->set_stream(e->stream());
      }
      ASSERT_EQ(a.allocator_allocated_bytes(), b.allocator_allocated_bytes()) << "event " << i;
      ASSERT_EQ(a.allocator_reserved_bytes(), b.allocator_reserved_bytes()) << "event " << i;
      if (a.api() != proto::TORCH_ALLOCATOR) {
        ASSERT_FALSE(b.has_allocator_allocated_bytes()) << "event " << i;
      } else {  // version 1 leaves a zero out; the reader fills both in
        a.set_allocator_allocated_bytes(a.allocator_allocated_bytes());
        a.set_allocator_reserved_bytes(a.allocator_reserved_bytes());
      }
      ASSERT_EQ(a.SerializeAsString(), b.SerializeAsString()) << "event " << i;
    }
    EXPECT_GT(torch_events, 10000u);  // the totals were exercised, not only driver events
    ASSERT_EQ(v2.ends.size(), v1.ends.size());
  }
}

// Re-encoding is a fixed point: the version-3 rewrite of examples/train_leak.mtrace, read as version 3 by
// bench/trace_size_reencode.h's own filler (sticky fields and totals filled in) and encoded again, gives
// the same bytes, chunk for chunk. What the filler reads is thus what the encoder meant.
TEST(TraceV2, VersionThreeReencodesToItself) {
  reencode::Chunks v1 = reencode::split_chunks(read_file(MEMTRACE_EXAMPLE_TRACE));
  reencode::Reencoder from_v1(0, 1);
  std::vector<std::string> v3;
  for (const std::string& c : v1.records) v3.push_back(from_v1.chunk(c));
  reencode::Reencoder from_v3(0, 3);
  for (size_t i = 0; i < v3.size(); ++i) ASSERT_EQ(from_v3.chunk(v3[i]), v3[i]) << "chunk " << i;
}

}  // namespace
}  // namespace memtrace
