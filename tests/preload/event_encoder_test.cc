// The tracer's Event encoding, trace format v3 (preload/record/event_encoder.h): the fields each record carries
// for a small hand-made sequence, decoded with the classes generated from proto/memtrace.proto, and the
// exact bytes of the sticky fields (layer, api, tid, device, stream) as they repeat and change.
#include "record/event_encoder.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <string>

#include "memtrace.pb.h"

namespace memtrace {
namespace {

constexpr uint64_t kStartNs = 1'000'000'000;  // TraceStart.start_monotonic_ns of every test here
constexpr uint64_t kMiB = 1 << 20;

MemoryEvent torch(EventKind kind, int32_t device, uint64_t address, uint64_t size, uint64_t allocated,
                  uint64_t reserved) {
  return MemoryEvent{.kind = kind,
                     .layer = Layer::kBlock,
                     .api = Api::kTorchAllocator,
                     .device = device,
                     .address = address,
                     .size = size,
                     .allocator_allocated_bytes = allocated,
                     .allocator_reserved_bytes = reserved};
}

// Encodes `e` at `t_ns` (tid 7, stack 3) and, unless `commit` is false (the record did not fit in the
// buffer), commits it; returns the Event as a reader's protobuf runtime sees it.
proto::Event encode(EventEncoder& encoder, const MemoryEvent& e, uint64_t t_ns, bool commit = true) {
  uint8_t buf[EventEncoder::kMaxEventBytes];
  ProtoWriter w(buf, buf + sizeof buf);
  EventEncoder::Pending p = encoder.encode_event(e, t_ns, 7, 3, w);
  EXPECT_TRUE(w.ok());
  if (commit) encoder.commit(p);
  proto::Event out;
  EXPECT_TRUE(out.ParseFromArray(buf, int(w.size())));
  return out;
}

// What the test asserts of each record: its time and which totals it carries (-1 = left out).
struct Expected {
  int64_t time_delta_us;
  int64_t allocated_bytes;
  int64_t reserved_bytes;
};

void expect_fields(const proto::Event& e, Expected x, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(e.time_delta_ns(), 0);  // version 2 never writes nanoseconds
  EXPECT_EQ(e.time_delta_us(), x.time_delta_us);
  EXPECT_EQ(e.has_allocator_allocated_bytes(), x.allocated_bytes >= 0);
  if (x.allocated_bytes >= 0) EXPECT_EQ(e.allocator_allocated_bytes(), uint64_t(x.allocated_bytes));
  EXPECT_EQ(e.has_allocator_reserved_bytes(), x.reserved_bytes >= 0);
  if (x.reserved_bytes >= 0) EXPECT_EQ(e.allocator_reserved_bytes(), uint64_t(x.reserved_bytes));
}

// One device's PyTorch blocks, a lost event, a chunk boundary, another device and another API in between.
// Times are ns after kStartNs; the record's time is floor(t / 1000) us, its delta that minus the previous.
TEST(EventEncoder, SequenceWithALossAndAChunkBoundary) {
  EventEncoder enc;
  enc.begin(kStartNs);
  // t 1500 ns -> 1 us, delta 1. First block event of device 0: both totals written.
  expect_fields(encode(enc, torch(EventKind::kAlloc, 0, 0x1000, 512, 512, 2 * kMiB), kStartNs + 1'500),
                {1, 512, 2 * kMiB}, "first alloc");
  // t 2999 -> 2 us, delta 1. 512 + 1024 = 1536 and reserved unchanged: both derived.
  expect_fields(encode(enc, torch(EventKind::kAlloc, 0, 0x1200, 1024, 1536, 2 * kMiB), kStartNs + 2'999), {1, -1, -1},
                "second alloc");
  // t 3000 -> 3 us, delta 1. 1536 - 512 = 1024: derived.
  expect_fields(encode(enc, torch(EventKind::kFree, 0, 0x1000, 512, 1024, 2 * kMiB), kStartNs + 3'000), {1, -1, -1},
                "free");
  // t 10000 -> 10 us, delta 7. 1024 + 4096 = 5120 derived; reserved grew to 4 MiB: written.
  const uint64_t reserved = 4 * kMiB;
  expect_fields(encode(enc, torch(EventKind::kAlloc, 0, 0x200000, 4096, 5120, reserved), kStartNs + 10'000),
                {7, -1, int64_t(reserved)}, "alloc that grew the reserve");
  // An ALLOC of 256 bytes is lost (allocated becomes 5376 in PyTorch, unseen).
  enc.event_lost();
  // t 12345 -> 12 us, delta 2. 5376 - 4096 = 1280, which 5120 - 4096 would get wrong: after a loss both
  // totals are written.
  expect_fields(encode(enc, torch(EventKind::kFree, 0, 0x200000, 4096, 1280, reserved), kStartNs + 12'345),
                {2, 1280, int64_t(reserved)}, "first event after the loss");
  enc.start_chunk();
  // t 12999 -> 12 us, delta 0 (left out: the proto3 default). First of the chunk: both written.
  expect_fields(encode(enc, torch(EventKind::kAlloc, 0, 0x1400, 256, 1536, reserved), kStartNs + 12'999),
                {0, 1536, int64_t(reserved)}, "first event of the chunk");
  // t 1000000 -> 1000 us, delta 988. A driver allocation carries no totals.
  MemoryEvent segment{.kind = EventKind::kAlloc,
                      .layer = Layer::kDriver,
                      .api = Api::kCudaMalloc,
                      .device = 0,
                      .address = 0x7f0000000000,
                      .size = 2 * kMiB};
  proto::Event driver = encode(enc, segment, kStartNs + 1'000'000);
  expect_fields(driver, {988, -1, -1}, "driver alloc");
  EXPECT_EQ(driver.api(), proto::CUDA_MALLOC);
  EXPECT_EQ(driver.size(), 2 * kMiB);
  // t 1000500 -> 1000 us, delta 0. Device 1's first block event: both written, whatever device 0 holds.
  expect_fields(encode(enc, torch(EventKind::kAlloc, 1, 0x2000, 100, 100, 2 * kMiB), kStartNs + 1'000'500),
                {0, 100, 2 * kMiB}, "device 1");
  // t 1002000 -> 1002 us, delta 2. Device 0 again: 1536 + 64 = 1600, derived across the other two.
  expect_fields(encode(enc, torch(EventKind::kAlloc, 0, 0x1500, 64, 1600, reserved), kStartNs + 1'002'000), {2, -1, -1},
                "device 0 after device 1");
  // t 1003000 -> 1003 us, delta 1. PyTorch says 1500, not 1600 - 64 = 1536: written.
  expect_fields(encode(enc, torch(EventKind::kFree, 0, 0x1500, 64, 1500, reserved), kStartNs + 1'003'000),
                {1, 1500, -1}, "a total that does not follow");
  // t 1004000 -> 1004 us, delta 1. An OOM changes nothing: 1500 and 4 MiB, both derived.
  expect_fields(encode(enc, torch(EventKind::kOom, 0, 0, 1ull << 30, 1500, reserved), kStartNs + 1'004'000),
                {1, -1, -1}, "OOM");
  // TraceEnd at t 2000999 -> 2000 us: 2000 - 1004 = 996.
  EXPECT_EQ(enc.end_time_delta_us(kStartNs + 2'000'999), 996);
  // And an event after it (the job survived a signal) counts from the TraceEnd: 2003 - 2000 = 3.
  expect_fields(encode(enc, segment, kStartNs + 2'003'000), {3, -1, -1}, "event after the TraceEnd");
}

// The other Event fields are written as version 1 wrote them; only the time moved to field 23.
TEST(EventEncoder, OtherFieldsAsInVersionOne) {
  EventEncoder enc;
  enc.begin(kStartNs);
  MemoryEvent e{.kind = EventKind::kDeviceUsage,
                .layer = Layer::kDriver,
                .api = Api::kNvmlSample,
                .device = -1,
                .stream = 0x7f00,
                .address = 0x7f1234560000,
                .size = 1ull << 40,
                .result = 2,
                .device_free_bytes = 5,
                .device_total_bytes = 6,
                .handle = 99,
                .memory = Memory::kHostPinned,
                .graph = 0xabc,
                .capture_id = 11,
                .has_process_usage = true,
                .process_used_bytes = 0,
                .other_processes_used_bytes = 12,
                .context = 13};
  proto::Event x = encode(enc, e, kStartNs + 5'000'000);
  EXPECT_EQ(x.kind(), proto::DEVICE_USAGE);
  EXPECT_EQ(x.layer(), proto::LAYER_DRIVER);
  EXPECT_EQ(x.api(), proto::NVML_SAMPLE);
  EXPECT_EQ(x.time_delta_us(), 5000);
  EXPECT_EQ(x.tid(), 7u);
  EXPECT_EQ(x.device(), -1);
  EXPECT_EQ(x.stream(), 0x7f00u);
  EXPECT_EQ(x.address(), 0x7f1234560000u);
  EXPECT_EQ(x.size(), 1ull << 40);
  EXPECT_EQ(x.result(), 2);
  EXPECT_EQ(x.stack_id(), 3u);
  EXPECT_FALSE(x.has_allocator_allocated_bytes());  // not a TORCH_ALLOCATOR event
  EXPECT_FALSE(x.has_allocator_reserved_bytes());
  EXPECT_EQ(x.device_free_bytes(), 5u);
  EXPECT_EQ(x.device_total_bytes(), 6u);
  EXPECT_EQ(x.handle(), 99u);
  EXPECT_EQ(x.memory(), proto::MEMORY_HOST_PINNED);
  EXPECT_EQ(x.graph(), 0xabcu);
  EXPECT_EQ(x.capture_id(), 11u);
  EXPECT_TRUE(x.has_process_used_bytes());
  EXPECT_EQ(x.process_used_bytes(), 0u);
  EXPECT_EQ(x.other_processes_used_bytes(), 12u);
  EXPECT_EQ(x.context(), 13u);
}

// The time field's bytes: tag 23 << 3 | 0 = 184 = varint b8 01, then zigzag(-2) = 3 (a clock read before
// the previous record's cannot happen under the recorder's lock, but the field is signed like version 1's).
TEST(EventEncoder, TimeIsFieldTwentyThree) {
  EventEncoder enc;
  enc.begin(kStartNs);
  uint8_t buf[64];
  ProtoWriter w(buf, buf + sizeof buf);
  // 5 us, delta 5; device 0 and every other field at its default. The first Event: the five sticky fields
  // are written, as tag + 0 (layer 10 00, api 18 00, tid 28 00, device 30 00, stream 38 00); the others
  // are left out.
  enc.commit(enc.encode_event(MemoryEvent{.device = 0}, kStartNs + 5'000, 0, 0, w));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), w.size()),  // zigzag(5) = 10
            std::string("\x10\x00\x18\x00\xb8\x01\x0a\x28\x00\x30\x00\x38\x00", 13));
  // From here on the sticky fields repeat and are left out: the time alone.
  ProtoWriter w2(buf, buf + sizeof buf);
  enc.encode_event(MemoryEvent{.device = 0}, kStartNs + 3'999, 0, 0, w2);  // 3 us: delta 3 - 5 = -2
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), w2.size()), std::string("\xb8\x01\x03", 3));
  // A clock read before the start reads as the start (0 us): delta 0 - 5 = -5, zigzag 9.
  ProtoWriter w3(buf, buf + sizeof buf);
  enc.encode_event(MemoryEvent{.device = 0}, kStartNs - 1, 0, 0, w3);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), w3.size()), std::string("\xb8\x01\x09", 3));
}

// A record that did not fit (not committed) changes nothing: the retry is encoded against the same state.
TEST(EventEncoder, UncommittedRecordChangesNothing) {
  EventEncoder enc;
  enc.begin(kStartNs);
  encode(enc, torch(EventKind::kAlloc, 0, 0x1000, 512, 512, 2 * kMiB), kStartNs + 1'000);  // 1 us
  MemoryEvent second = torch(EventKind::kAlloc, 0, 0x1200, 1024, 1536, 2 * kMiB);
  expect_fields(encode(enc, second, kStartNs + 2'000, /*commit=*/false), {1, -1, -1}, "did not fit");
  // Retried at 5 us: delta 5 - 1 = 4 (from the first event, not from the one that did not fit), and
  // 512 + 1024 still derived.
  expect_fields(encode(enc, second, kStartNs + 5'000), {4, -1, -1}, "retry");
}

// A chunk that begins between encode and commit (a signal handler flushed the buffer while this thread
// was appending): the next event writes both totals, as the first of a chunk must.
TEST(EventEncoder, ChunkBegunBeforeCommitWritesTotalsAgain) {
  EventEncoder enc;
  enc.begin(kStartNs);
  uint8_t buf[23 * 12];
  ProtoWriter w(buf, buf + sizeof buf);
  EventEncoder::Pending p =
      enc.encode_event(torch(EventKind::kAlloc, 0, 0x1000, 512, 512, 2 * kMiB), kStartNs, 0, 0, w);
  enc.start_chunk();
  enc.commit(p);
  proto::Event next = encode(enc, torch(EventKind::kAlloc, 0, 0x1200, 1024, 1536, 2 * kMiB), kStartNs + 1'000);
  expect_fields(next, {1, 1536, 2 * kMiB}, "next event");
  // And the five sticky fields, although they repeat the committed record's.
  EXPECT_TRUE(next.has_layer() && next.has_api() && next.has_tid() && next.has_device() && next.has_stream());
}

// Devices outside the table (ordinal 64 and up, or -1) always carry both totals.
TEST(EventEncoder, DevicesOutsideTheTableWriteBothTotals) {
  EventEncoder enc;
  enc.begin(kStartNs);
  for (int32_t device : {EventEncoder::kDevices, -1}) {
    SCOPED_TRACE(device);
    encode(enc, torch(EventKind::kAlloc, device, 0x1000, 512, 512, 2 * kMiB), kStartNs);
    expect_fields(encode(enc, torch(EventKind::kAlloc, device, 0x1200, 1024, 1536, 2 * kMiB), kStartNs),
                  {0, 1536, 2 * kMiB}, "second event");
  }
  // Ordinal 63, the table's last slot, derives.
  encode(enc, torch(EventKind::kAlloc, 63, 0x1000, 512, 512, 2 * kMiB), kStartNs);
  expect_fields(encode(enc, torch(EventKind::kAlloc, 63, 0x1200, 1024, 1536, 2 * kMiB), kStartNs), {0, -1, -1},
                "device 63");
}

// begin() (a new trace: the start, or a forked child's start) forgets every device's totals and the time.
TEST(EventEncoder, BeginStartsAfresh) {
  EventEncoder enc;
  enc.begin(kStartNs);
  encode(enc, torch(EventKind::kAlloc, 0, 0x1000, 512, 512, 2 * kMiB), kStartNs + 9'000);
  enc.begin(kStartNs + 10'000);
  proto::Event first = encode(enc, torch(EventKind::kAlloc, 0, 0x1200, 1024, 1536, 2 * kMiB), kStartNs + 12'000);
  expect_fields(first, {2, 1536, 2 * kMiB}, "first event of the new trace");
  EXPECT_TRUE(first.has_layer() && first.has_api() && first.has_tid() && first.has_device() && first.has_stream());
}

// The bytes of `e` encoded at `t_ns` with thread `tid` and no stack, as hex ("08 01 ..."); committed
// unless `commit` is false.
std::string hex_bytes(EventEncoder& enc, const MemoryEvent& e, uint32_t tid, uint64_t t_ns, bool commit = true) {
  uint8_t buf[EventEncoder::kMaxEventBytes];
  ProtoWriter w(buf, buf + sizeof buf);
  EventEncoder::Pending p = enc.encode_event(e, t_ns, tid, 0, w);
  EXPECT_TRUE(w.ok());
  if (commit) enc.commit(p);
  std::string out;
  for (size_t i = 0; i < w.size(); ++i) {
    char byte[4];
    std::snprintf(byte, sizeof byte, i ? " %02x" : "%02x", buf[i]);
    out += byte;
  }
  return out;
}

MemoryEvent with_stream(MemoryEvent e, uint64_t stream) {
  e.stream = stream;
  return e;
}

// Version 3's sticky fields, byte for byte. Tags (field << 3, varint): kind 08, layer 10, api 18, tid 28,
// device 30, stream 38, size 48, allocated 60, reserved 68; time_delta_us b8 01. Values: TORCH_ALLOCATOR
// 50 = 0x32, LAYER_BLOCK 2, LAYER_DRIVER 1, CUDA_MALLOC 1, PYTHON_FINALIZING 8, size and allocated 100 =
// 0x64, reserved 1000 = 0x3e8 = varint e8 07 (0x68 | 0x80, 1000 >> 7 = 7), device zigzag(1) = 2.
// Every event is at 1 us: the first one's delta is 1 (zigzag 2), the others' 0 (left out).
TEST(EventEncoder, StickyFieldsWrittenOnlyWhenTheyChange) {
  EventEncoder enc;
  enc.begin(kStartNs);
  const uint64_t t = kStartNs + 1'000;
  // The trace's first Event: all five written, device 0 and stream 0 as tag + 0; both totals (device 0's
  // first TORCH_ALLOCATOR event).
  EXPECT_EQ(hex_bytes(enc, torch(EventKind::kAlloc, 0, 0, 100, 100, 1000), 7, t),
            "08 01 10 02 18 32 b8 01 02 28 07 30 00 38 00 48 64 60 64 68 e8 07");
  // Layer, api, tid, device and stream repeat: left out; 100 - 100 = 0 and 1000 derived. Kind and size
  // alone: what a PyTorch block event of a steady loop is.
  EXPECT_EQ(hex_bytes(enc, torch(EventKind::kFree, 0, 0, 100, 0, 1000), 7, t), "08 02 48 64");
  // Another thread: tid 9 written (0 + 100 = 100 derived).
  EXPECT_EQ(hex_bytes(enc, torch(EventKind::kAlloc, 0, 0, 100, 100, 1000), 9, t), "08 01 28 09 48 64");
  // Device 1: device written (zigzag 2), and its totals (its first TORCH_ALLOCATOR event).
  EXPECT_EQ(hex_bytes(enc, torch(EventKind::kAlloc, 1, 0, 100, 100, 1000), 9, t), "08 01 30 02 48 64 60 64 68 e8 07");
  // Back to device 0, the default, written explicitly (30 00); stream 0x10 (38 10). Device 0's totals:
  // 100 - 100 = 0, derived.
  EXPECT_EQ(hex_bytes(enc, with_stream(torch(EventKind::kFree, 0, 0, 100, 0, 1000), 0x10), 9, t),
            "08 02 30 00 38 10 48 64");
  // tid and stream back to 0: both written as tag + 0. 0 + 100 = 100 derived.
  EXPECT_EQ(hex_bytes(enc, torch(EventKind::kAlloc, 0, 0, 100, 100, 1000), 0, t), "08 01 28 00 38 00 48 64");
  // A driver allocation: layer 1 and api 1 written; no totals (not TORCH_ALLOCATOR).
  MemoryEvent driver{
      .kind = EventKind::kAlloc, .layer = Layer::kDriver, .api = Api::kCudaMalloc, .device = 0, .size = 100};
  EXPECT_EQ(hex_bytes(enc, driver, 0, t), "08 01 10 01 18 01 48 64");
  // Layer and api back to 0 (LAYER_UNKNOWN, API_UNKNOWN): written as tag + 0.
  MemoryEvent finalizing{.kind = EventKind::kPythonFinalizing, .device = 0};
  EXPECT_EQ(hex_bytes(enc, finalizing, 0, t), "08 08 10 00 18 00");
  // The same again: the kind alone.
  EXPECT_EQ(hex_bytes(enc, finalizing, 0, t), "08 08");
}

// The first Event of a chunk and the first after a lost event write all five sticky fields (and both
// totals), although they repeat: the points where a reader may pick up. Times as above: 1 us, delta 1
// first, 0 after.
TEST(EventEncoder, StickyFieldsWrittenInFullAfterAChunkBoundaryAndALoss) {
  EventEncoder enc;
  enc.begin(kStartNs);
  const uint64_t t = kStartNs + 1'000;
  const MemoryEvent alloc = torch(EventKind::kAlloc, 0, 0, 100, 100, 1000);
  const MemoryEvent free = torch(EventKind::kFree, 0, 0, 100, 0, 1000);
  EXPECT_EQ(hex_bytes(enc, alloc, 7, t), "08 01 10 02 18 32 b8 01 02 28 07 30 00 38 00 48 64 60 64 68 e8 07");
  enc.start_chunk();
  // All five, device and stream 0 as tag + 0; allocated 0 written as tag + 0 (60 00), reserved 1000.
  const char* free_in_full = "08 02 10 02 18 32 28 07 30 00 38 00 48 64 60 00 68 e8 07";
  EXPECT_EQ(hex_bytes(enc, free, 7, t), free_in_full);
  EXPECT_EQ(hex_bytes(enc, alloc, 7, t), "08 01 48 64");  // back to the short form within the chunk
  enc.event_lost();
  EXPECT_EQ(hex_bytes(enc, free, 7, t), free_in_full);
  EXPECT_EQ(hex_bytes(enc, alloc, 7, t), "08 01 48 64");
}

// A record that was encoded but not committed (it did not fit) leaves the sticky fields as the last
// committed record had them: the next record is compared with that one.
TEST(EventEncoder, UncommittedRecordLeavesTheStickyFields) {
  EventEncoder enc;
  enc.begin(kStartNs);
  const uint64_t t = kStartNs + 1'000;
  const MemoryEvent alloc = torch(EventKind::kAlloc, 0, 0, 100, 100, 1000);
  hex_bytes(enc, alloc, 7, t);
  // tid 9 on device 1 would be written, but the record is not committed.
  EXPECT_EQ(hex_bytes(enc, torch(EventKind::kAlloc, 1, 0, 100, 100, 1000), 9, t, /*commit=*/false),
            "08 01 28 09 30 02 48 64 60 64 68 e8 07");
  // tid 7 and device 0 still repeat the committed record: left out (100 + 100 = 200 derived).
  EXPECT_EQ(hex_bytes(enc, torch(EventKind::kAlloc, 0, 0, 100, 200, 1000), 7, t), "08 01 48 64");
}

// encode_event() writes through UncheckedFieldWriter when the writer has room for the longest event and
// through ProtoWriter's checked calls when it has not: the same bytes either way, and a clean failure
// (ok() false) when even the checked calls run out of room.
TEST(EventEncoder, CheckedAndUncheckedWritersGiveTheSameBytes) {
  // Every field set, the longest values: each varint 10 bytes (values >= 2^63), device -1 (zigzag 1).
  MemoryEvent e{.kind = EventKind::kAlloc,
                .layer = Layer::kBlock,
                .api = Api::kTorchAllocator,
                .device = -1,
                .stream = ~0ull,
                .address = ~0ull,
                .size = ~0ull,
                .result = -2,
                .allocator_allocated_bytes = ~0ull,
                .allocator_reserved_bytes = ~0ull,
                .device_free_bytes = ~0ull,
                .device_total_bytes = ~0ull,
                .handle = ~0ull,
                .graph = ~0ull,
                .capture_id = ~0ull,
                .has_process_usage = true,
                .process_used_bytes = ~0ull,
                .other_processes_used_bytes = ~0ull,
                .context = ~0ull};
  auto encode_into = [&](size_t room, std::string* out) {
    EventEncoder enc;
    enc.begin(kStartNs);
    uint8_t buf[EventEncoder::kMaxEventBytes + 1];
    ProtoWriter w(buf, buf + room);
    enc.encode_event(e, kStartNs + 3'000, ~0u, ~0ull, w);
    *out = std::string(reinterpret_cast<char*>(buf), w.size());
    return w.ok();
  };
  std::string unchecked, checked, short_of_room;
  ASSERT_TRUE(encode_into(EventEncoder::kMaxEventBytes, &unchecked));
  // Fields written (time 3 us: zigzag 6, one byte): kind, layer, api (tag+1 each = 6), time (2-byte tag +
  // 1 = 3), tid (1 + 5 = 6), device (1 + 1 = 2), result (1 + 1 = 2: zigzag(-2) = 3), the 14 fields of
  // ~0 (stream, address, size, stack_id, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22: 1 + 10 = 11 each, fields
  // 16-22 have 2-byte tags: 16, 18, 19, 20, 21, 22 -> +6) = 6 + 3 + 6 + 2 + 2 + 154 + 6 = 179; memory
  // (17) is 0 and left out.
  EXPECT_EQ(unchecked.size(), 179u);
  ASSERT_TRUE(encode_into(unchecked.size(), &checked));  // less than kMaxEventBytes: the checked path
  EXPECT_EQ(checked, unchecked);
  EXPECT_FALSE(encode_into(unchecked.size() - 1, &short_of_room));
  proto::Event parsed;
  ASSERT_TRUE(parsed.ParseFromString(unchecked));
  EXPECT_EQ(parsed.device(), -1);
  EXPECT_EQ(parsed.result(), -2);
  EXPECT_EQ(parsed.context(), ~0ull);
  EXPECT_EQ(parsed.other_processes_used_bytes(), ~0ull);
}

// kMaxEventBytes bounds what encode_event() can write: the longest Event it can produce, every field at its
// longest, fits (the unchecked writer relies on it).
TEST(EventEncoder, TheLongestEventFitsKMaxEventBytes) {
  // PyTorch API (so that both totals are written: a device outside 0..63 never derives them), the other
  // enums at 255, every 64-bit value ~0, device and result INT32_MIN, tid ~0u, and the most negative time
  // delta the encoder can form: an event at the latest time (UINT64_MAX ns) committed, then one at the start.
  MemoryEvent e{.kind = static_cast<EventKind>(255),
                .layer = static_cast<Layer>(255),
                .api = Api::kTorchAllocator,
                .device = INT32_MIN,
                .stream = ~0ull,
                .address = ~0ull,
                .size = ~0ull,
                .result = INT32_MIN,
                .allocator_allocated_bytes = ~0ull,
                .allocator_reserved_bytes = ~0ull,
                .device_free_bytes = ~0ull,
                .device_total_bytes = ~0ull,
                .handle = ~0ull,
                .memory = static_cast<Memory>(255),
                .graph = ~0ull,
                .capture_id = ~0ull,
                .has_process_usage = true,
                .process_used_bytes = ~0ull,
                .other_processes_used_bytes = ~0ull,
                .context = ~0ull};
  EventEncoder enc;
  enc.begin(kStartNs);
  uint8_t buf[EventEncoder::kMaxEventBytes];
  ProtoWriter first(buf, buf + sizeof buf);
  enc.commit(enc.encode_event(e, ~0ull, ~0u, ~0ull, first));
  enc.start_chunk();  // the first Event of a chunk: the sticky fields are written although they repeat
  ProtoWriter w(buf, buf + sizeof buf);
  enc.encode_event(e, kStartNs, ~0u, ~0ull, w);
  ASSERT_TRUE(w.ok());
  // Bytes (tag + value): kind, layer 1 + 2 each; api (50) 1 + 1; time: tag 2 + zigzag of
  // -((2^64 - 1 - 1e9) / 1000 us) ~ -1.8e16, below 2^55, so its zigzag is below 2^56: 8 bytes -> 10; tid
  // 1 + 5; device and result 1 + 5 (zigzag(INT32_MIN) = 2^32 - 1); stream, address, size, stack_id, 12, 13,
  // 14, 15: 1 + 10 each (88); handle 16, graph 18, capture 19, 20, 21, context 22: 2 + 10 each (72);
  // memory 17: 2 + 2. 3 + 3 + 2 + 10 + 6 + 6 + 6 + 88 + 72 + 4 = 200.
  EXPECT_EQ(w.size(), 200u);
  EXPECT_LE(w.size(), EventEncoder::kMaxEventBytes);
  proto::Event parsed;
  ASSERT_TRUE(parsed.ParseFromArray(buf, int(w.size())));
  EXPECT_EQ(parsed.device(), INT32_MIN);
  EXPECT_EQ(parsed.time_delta_us(), -int64_t((~0ull - kStartNs) / 1000));
}

}  // namespace
}  // namespace memtrace
