// decode_event_record: the fast path for Event records must give the Record protobuf's parser gives, and
// refuse (for the parser to handle) everything it does not know.
#include <gtest/gtest.h>

#include <string>

#include "event_decoder.h"

namespace memtrace {
namespace {

// Decodes `bytes` both ways decode_event_record reads varints: with no byte after the record readable,
// and with 9 readable bytes of 0x01 after it, which would end any varint that ran past the record (so
// a varint reader that did not stop at the record's end would accept what it must refuse). Both must
// give the same answer and the same Record.
bool decode(const std::string& bytes, proto::Record& record) {
  proto::Record bounded;
  bool bounded_ok = decode_event_record(bytes.data(), bytes.size(), bounded);
  const std::string padded = bytes + std::string(9, '\x01');
  bool unbounded_ok = decode_event_record(padded.data(), bytes.size(), record, 9);
  EXPECT_EQ(bounded_ok, unbounded_ok);
  if (bounded_ok && unbounded_ok) {
    EXPECT_EQ(bounded.SerializeAsString(), record.SerializeAsString());
  }
  return unbounded_ok;
}

TEST(EventDecoder, DecodesHandWrittenBytes) {
  // Record.event (field 5, length-delimited: tag 5 << 3 | 2 = 0x2A), 6 bytes of Event:
  //   kind = ALLOC:        tag 1 << 3 | 0 = 0x08, value 1
  //   time_delta_ns = -3:  tag 4 << 3 = 0x20, zigzag(-3) = 2 * 3 - 1 = 5
  //   device = -1:         tag 6 << 3 = 0x30, zigzag(-1) = 1
  const std::string bytes = {0x2A, 0x06, 0x08, 0x01, 0x20, 0x05, 0x30, 0x01};
  proto::Record record;
  ASSERT_TRUE(decode(bytes, record));
  ASSERT_EQ(record.kind_case(), proto::Record::kEvent);
  EXPECT_EQ(record.event().kind(), proto::ALLOC);
  EXPECT_EQ(record.event().time_delta_ns(), -3);
  EXPECT_EQ(record.event().device(), -1);
  EXPECT_EQ(record.event().address(), 0u);
  EXPECT_FALSE(record.event().has_process_used_bytes());
}

TEST(EventDecoder, GivesWhatTheParserGivesAndResetsTheReusedEvent) {
  proto::Record full;
  proto::Event& e = *full.mutable_event();
  e.set_kind(proto::FREE);
  e.set_layer(proto::LAYER_BLOCK);
  e.set_api(proto::TORCH_ALLOCATOR);
  e.set_time_delta_ns(-1234567890123);
  e.set_tid(4000000000u);
  e.set_device(-7);
  e.set_stream(0xffffffffffffffffull);
  e.set_address(0x7f0000001000);
  e.set_size(1ull << 40);
  e.set_result(-2);
  e.set_stack_id(42);
  e.set_allocator_allocated_bytes(1000);
  e.set_allocator_reserved_bytes(2000);
  e.set_device_free_bytes(3000);
  e.set_device_total_bytes(4000);
  e.set_handle(5000);
  e.set_memory(proto::MEMORY_MANAGED);
  e.set_graph(6000);
  e.set_capture_id(7000);
  e.set_process_used_bytes(0);  // present though zero: presence must survive
  e.set_other_processes_used_bytes(8000);
  e.set_context(9000);

  proto::Record reused;
  ASSERT_TRUE(decode(full.SerializeAsString(), reused));
  EXPECT_EQ(reused.SerializeAsString(), full.SerializeAsString());
  EXPECT_TRUE(reused.event().has_process_used_bytes());
  EXPECT_EQ(reused.event().time_delta_ns(), -1234567890123);
  EXPECT_EQ(reused.event().tid(), 4000000000u);

  // The next, smaller event leaves nothing of the previous one behind.
  proto::Record small;
  small.mutable_event()->set_address(0x1000);
  ASSERT_TRUE(decode(small.SerializeAsString(), reused));
  EXPECT_EQ(reused.SerializeAsString(), small.SerializeAsString());
  EXPECT_EQ(reused.event().stack_id(), 0u);
  EXPECT_FALSE(reused.event().has_process_used_bytes());
}

TEST(EventDecoder, RefusesWhatItDoesNotKnow) {
  proto::Record record;
  proto::Record start;
  start.mutable_start()->set_pid(1);
  EXPECT_FALSE(decode(start.SerializeAsString(), record));
  // An Event field 99 (tag 99 << 3 = 792 = varint 0x98 0x06), value 1: unknown to this decoder.
  EXPECT_FALSE(decode(std::string{0x2A, 0x03, char(0x98), 0x06, 0x01}, record));
  // Event field 8 (address) as a length-delimited field: tag 8 << 3 | 2 = 0x42.
  EXPECT_FALSE(decode(std::string{0x2A, 0x02, 0x42, 0x00}, record));
  // Two event fields in one record (protobuf merges them).
  EXPECT_FALSE(decode(std::string{0x2A, 0x02, 0x08, 0x01, 0x2A, 0x02, 0x08, 0x02}, record));
  // The Event's length says 5 bytes, 2 follow.
  EXPECT_FALSE(decode(std::string{0x2A, 0x05, 0x08, 0x01}, record));
  // A varint that does not end before the record does.
  EXPECT_FALSE(decode(std::string{0x2A, 0x02, 0x40, char(0x80)}, record));
  // Event.stream (tag 7 << 3 = 0x38) as an 11-byte varint: 10 bytes with the continuation bit, then 0x01.
  // Ten bytes is the longest varint.
  std::string eleven = {0x2A, 0x0C, 0x38};
  eleven += std::string(10, char(0x80)) + '\x01';
  EXPECT_FALSE(decode(eleven, record));
  // The same value in 10 bytes is the longest there is: 9 x 0x80 then 0x01 is 1 << 63.
  std::string ten = {0x2A, 0x0B, 0x38};
  ten += std::string(9, char(0x80)) + '\x01';
  ASSERT_TRUE(decode(ten, record));
  EXPECT_EQ(record.event().stream(), 1ull << 63);
}

}  // namespace
}  // namespace memtrace
