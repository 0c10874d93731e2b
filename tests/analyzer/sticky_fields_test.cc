// Trace format version 3's sticky fields (proto/memtrace.proto: Event.layer, api, tid, device, stream):
// one absent from an Event record takes the previous Event record's value (0 before the first), across
// chunks and whatever records come between; versions 1 and 2 read an absent field as 0. The reader fills
// them in before the allocator totals are derived, which key on api and device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "read/trace_reader.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// An Event with only its kind, address and size: every sticky field absent.
proto::Event bare(proto::EventKind kind, uint64_t address = 0, uint64_t size = 0) {
  proto::Event e;
  e.set_kind(kind);
  e.set_address(address);
  e.set_size(size);
  return e;
}

// The same with all five sticky fields written.
proto::Event full(proto::EventKind kind, proto::Layer layer, proto::Api api, uint32_t tid, int32_t device,
                  uint64_t stream, uint64_t address = 0, uint64_t size = 0) {
  proto::Event e = bare(kind, address, size);
  e.set_layer(layer);
  e.set_api(api);
  e.set_tid(tid);
  e.set_device(device);
  e.set_stream(stream);
  return e;
}

// A Record holding `e` and, after it, Record field 15 (unknown to this reader) = 1: the same Event, but
// a record the fast decoder refuses, so that protobuf's parser reads it (the reader's slow path).
std::string slow_path_record(const proto::Event& e) {
  proto::Record r;
  *r.mutable_event() = e;
  std::string body = r.SerializeAsString() + std::string{char(15 << 3), 1};
  return test::varint(body.size()) + body;
}

// A Record holding `e` with Event field 30 (unknown to this reader) = 1 after `e`'s fields: the fast
// decoder stores `e`'s fields, sticky ones included, before it refuses the record at field 30.
std::string record_with_unknown_event_field(const proto::Event& e) {
  std::string event = e.SerializeAsString() + std::string{char(0xF0), 0x01, 0x01};  // tag 30 << 3, value 1
  std::string body = std::string{char(5 << 3 | 2)} + test::varint(event.size()) + event;
  return test::varint(body.size()) + body;
}

struct Sticky {
  proto::Layer layer;
  proto::Api api;
  uint32_t tid;
  int32_t device;
  uint64_t stream;
  bool operator==(const Sticky&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Sticky& s) {
  return out << "{layer " << s.layer << ", api " << s.api << ", tid " << s.tid << ", device " << s.device << ", stream "
             << s.stream << "}";
}

struct Read {
  std::vector<EventFields> events;     // as read_trace's sink gets them
  std::vector<proto::Event> messages;  // as the RecordCallback overload gives them
};

Read read(const std::string& name, const test::TraceBuilder& b) {
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  Read out;
  read_trace(path, SinkOf{[&](const EventFields& e) { out.events.push_back(e); }, ignore_record});
  read_trace(path, [&](const proto::Record& r) {
    if (r.has_event()) out.messages.push_back(r.event());
  });
  return out;
}

Sticky sticky(const EventFields& e) { return {e.layer(), e.api(), e.tid(), e.device(), e.stream()}; }
Sticky sticky(const proto::Event& e) { return {e.layer(), e.api(), e.tid(), e.device(), e.stream()}; }

// Checks both ways of reading: the sink's EventFields and the messages rebuilt from them.
void expect_sticky(const Read& r, const std::vector<Sticky>& expected) {
  ASSERT_EQ(r.events.size(), expected.size());
  ASSERT_EQ(r.messages.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(sticky(r.events[i]), expected[i]) << "event " << i;
    EXPECT_EQ(sticky(r.messages[i]), expected[i]) << "event " << i << " as a message";
  }
}

constexpr proto::Layer kDriver = proto::LAYER_DRIVER, kBlock = proto::LAYER_BLOCK, kNoLayer = proto::LAYER_UNKNOWN;

TEST(StickyFields, FirstEventWithFieldsAbsentReadsZero) {
  test::TraceBuilder b(3);
  b.start().event(bare(proto::ALLOC, 0x1000, 512)).end_chunk();
  Read r = read("v3-first-absent.mtrace", b);
  expect_sticky(r, {{kNoLayer, proto::API_UNKNOWN, 0, 0, 0}});
  EXPECT_EQ(r.events[0].address(), 0x1000u);
}

// Each absent field takes the previous Event's value, an explicit 0 included, field by field.
TEST(StickyFields, AbsentFieldsCarryWithinAChunkAndAnExplicitZeroIsKept) {
  test::TraceBuilder b(3);
  b.start();
  b.event(full(proto::ALLOC, kDriver, proto::CUDA_MALLOC, 7, 1, 0x50, 0x1000, 512));  // all written
  b.event(bare(proto::FREE, 0x1000));                                                 // all carried
  proto::Event zero_device = bare(proto::ALLOC, 0x2000, 64);
  zero_device.set_device(0);  // written: 0 after device 1
  zero_device.set_api(proto::CUDA_FREE);
  b.event(zero_device);
  b.event(bare(proto::FREE, 0x2000));  // device stays 0, api CUDA_FREE
  proto::Event stream_only = bare(proto::ALLOC);
  stream_only.set_stream(0);  // 0x50 -> 0
  stream_only.set_tid(9);
  b.event(stream_only);
  b.end_chunk();
  Read r = read("v3-carry-within-chunk.mtrace", b);
  expect_sticky(r, {{kDriver, proto::CUDA_MALLOC, 7, 1, 0x50},
                    {kDriver, proto::CUDA_MALLOC, 7, 1, 0x50},
                    {kDriver, proto::CUDA_FREE, 7, 0, 0x50},
                    {kDriver, proto::CUDA_FREE, 7, 0, 0x50},
                    {kDriver, proto::CUDA_FREE, 9, 0, 0}});
  // The non-sticky fields are the record's own: event 1's size is absent, 0, not event 0's 512.
  EXPECT_EQ(r.events[1].size(), 0u);
  EXPECT_EQ(r.events[1].kind(), proto::FREE);
}

// The carry goes on across chunks (a writer writes all five on a chunk's first Event, but the reader
// does not depend on it) and past records that are not Events; every Event kind sets them alike.
TEST(StickyFields, CarryAcrossChunksAndPastOtherRecordsFromEveryEventKind) {
  test::TraceBuilder b(3);
  b.start().event(full(proto::ALLOC, kDriver, proto::CUDA_MALLOC, 7, 2, 0x50, 0x1000, 512));
  proto::Event sample = bare(proto::DEVICE_USAGE);
  sample.set_api(proto::NVML_SAMPLE);
  sample.set_device(3);
  sample.set_device_free_bytes(kMiB);
  b.event(sample).end_chunk();
  b.stack(1, {0x400000}).event(bare(proto::FREE, 0x1000)).end_chunk();  // device 3, api NVML_SAMPLE
  Read r = read("v3-carry-across-chunks.mtrace", b);
  expect_sticky(r, {{kDriver, proto::CUDA_MALLOC, 7, 2, 0x50},
                    {kDriver, proto::NVML_SAMPLE, 7, 3, 0x50},
                    {kDriver, proto::NVML_SAMPLE, 7, 3, 0x50}});
}

// Records protobuf's parser reads (the fast decoder refuses them) follow the same rule, both ways: a
// slow-path Event takes what it leaves out from the fast path's last Event, and the next fast-path
// Event from it.
TEST(StickyFields, EventsReadByProtobufCarryTheSame) {
  test::TraceBuilder b(3);
  b.start().event(full(proto::ALLOC, kDriver, proto::CUDA_MALLOC, 7, 2, 0x50, 0x1000, 512));
  proto::Event slow = bare(proto::FREE, 0x1000);
  slow.set_device(0);  // explicit 0
  slow.set_tid(8);
  b.raw(slow_path_record(slow));
  b.raw(slow_path_record(bare(proto::ALLOC, 0x3000, 64)));  // all carried from the slow-path Event
  b.event(bare(proto::FREE, 0x3000));
  proto::Event refused_late = bare(proto::ALLOC, 0x5000, 8);
  refused_late.set_device(-1);  // stored by the fast decoder (undecoded), then read by protobuf
  b.raw(record_with_unknown_event_field(refused_late));
  b.raw(record_with_unknown_event_field(bare(proto::FREE, 0x5000)));  // device -1 carried
  b.end_chunk();
  Read r = read("v3-slow-path.mtrace", b);
  expect_sticky(r, {{kDriver, proto::CUDA_MALLOC, 7, 2, 0x50},
                    {kDriver, proto::CUDA_MALLOC, 8, 0, 0x50},
                    {kDriver, proto::CUDA_MALLOC, 8, 0, 0x50},
                    {kDriver, proto::CUDA_MALLOC, 8, 0, 0x50},
                    {kDriver, proto::CUDA_MALLOC, 8, -1, 0x50},
                    {kDriver, proto::CUDA_MALLOC, 8, -1, 0x50}});
  EXPECT_EQ(r.events[2].address(), 0x3000u);
}

// The allocator totals are derived after the sticky fields are filled in: an Event that leaves out api
// and device is a TORCH_ALLOCATOR event of the previous Event's device, and derives from that device's
// totals.
TEST(StickyFields, TotalsDeriveFromTheCarriedApiAndDevice) {
  test::TraceBuilder b(3);
  b.start();
  proto::Event d0 = full(proto::ALLOC, kBlock, proto::TORCH_ALLOCATOR, 7, 0, 0, 0x1000, 100);
  d0.set_allocator_allocated_bytes(100);
  d0.set_allocator_reserved_bytes(kMiB);
  b.event(d0);
  proto::Event d1 = bare(proto::ALLOC, 0x2000, 512);
  d1.set_device(1);
  d1.set_allocator_allocated_bytes(512);
  d1.set_allocator_reserved_bytes(2 * kMiB);
  b.event(d1);
  b.event(bare(proto::ALLOC, 0x3000, 1024));  // device 1, TORCH_ALLOCATOR: 512 + 1024 = 1536
  proto::Event back_to_0 = bare(proto::FREE, 0x1000, 100);
  back_to_0.set_device(0);
  b.event(back_to_0);  // device 0: 100 - 100 = 0, reserved 1 MiB
  proto::Event driver = bare(proto::ALLOC, 0x7f0000000000, 2 * kMiB);
  driver.set_layer(kDriver);
  driver.set_api(proto::CUDA_MALLOC);
  b.event(driver);  // not TORCH_ALLOCATOR: no totals
  proto::Event torch_again = bare(proto::ALLOC, 0x4000, 50);
  torch_again.set_layer(kBlock);
  torch_again.set_api(proto::TORCH_ALLOCATOR);
  b.event(torch_again);  // device 0 (carried): 0 + 50 = 50
  b.end_chunk();
  Read r = read("v3-totals.mtrace", b);
  ASSERT_EQ(r.events.size(), 6u);
  const std::vector<int32_t> device = {0, 1, 1, 0, 0, 0};
  const std::vector<proto::Api> api = {proto::TORCH_ALLOCATOR, proto::TORCH_ALLOCATOR, proto::TORCH_ALLOCATOR,
                                       proto::TORCH_ALLOCATOR, proto::CUDA_MALLOC,     proto::TORCH_ALLOCATOR};
  const std::vector<uint64_t> allocated = {100, 512, 1536, 0, 0, 50};
  const std::vector<uint64_t> reserved = {kMiB, 2 * kMiB, 2 * kMiB, kMiB, 0, kMiB};
  for (size_t i = 0; i < r.events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(r.events[i].device(), device[i]);
    EXPECT_EQ(r.events[i].api(), api[i]);
    EXPECT_EQ(r.events[i].allocator_allocated_bytes(), allocated[i]);
    EXPECT_EQ(r.events[i].allocator_reserved_bytes(), reserved[i]);
    EXPECT_EQ(r.events[i].has_allocator_allocated_bytes(), api[i] == proto::TORCH_ALLOCATOR);
  }
}

// Versions 1 and 2 have no carry: an absent field is 0 (proto3's default), on both paths.
TEST(StickyFields, VersionsOneAndTwoDoNotCarry) {
  for (uint32_t version : {1u, 2u}) {
    SCOPED_TRACE("version " + std::to_string(version));
    test::TraceBuilder b(version);
    b.start().event(full(proto::ALLOC, kDriver, proto::CUDA_MALLOC, 7, 1, 0x50, 0x1000, 512));
    b.event(bare(proto::FREE, 0x1000));
    b.raw(slow_path_record(bare(proto::FREE, 0x1000)));
    b.end_chunk();
    Read r = read("v" + std::to_string(version) + "-no-carry.mtrace", b);
    expect_sticky(r, {{kDriver, proto::CUDA_MALLOC, 7, 1, 0x50},
                      {kNoLayer, proto::API_UNKNOWN, 0, 0, 0},
                      {kNoLayer, proto::API_UNKNOWN, 0, 0, 0}});
  }
}

}  // namespace
}  // namespace memtrace
