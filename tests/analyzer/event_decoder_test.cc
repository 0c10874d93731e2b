// decode_event_record: the fast path for Event records must give the fields protobuf's parser gives, and
// refuse (for the parser to handle) everything it does not know.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "read/event_decoder.h"

namespace memtrace {
namespace {

// Decodes `bytes` both ways decode_event_record reads varints: with no byte after the record readable,
// and with 9 readable bytes of 0x01 after it, which would end any varint that ran past the record (so
// a varint reader that did not stop at the record's end would accept what it must refuse). Both must
// give the same answer and the same fields; when they accept, protobuf's parser must read the same
// Event (compared as the messages to_proto_event makes, which hold every accessor's value).
bool decode(const std::string& bytes, EventFields& event) {
  EventFields bounded;
  bool bounded_ok = decode_event_record(bytes.data(), bytes.size(), bounded);
  const std::string padded = bytes + std::string(9, '\x01');
  bool unbounded_ok = decode_event_record(padded.data(), bytes.size(), event, 9);
  EXPECT_EQ(bounded_ok, unbounded_ok);
  if (bounded_ok && unbounded_ok) {
    EXPECT_EQ(to_proto_event(bounded).SerializeAsString(), to_proto_event(event).SerializeAsString());
    proto::Record parsed;
    EXPECT_TRUE(parsed.ParseFromString(bytes));
    EXPECT_EQ(to_proto_event(event).SerializeAsString(), parsed.event().SerializeAsString());
  }
  return unbounded_ok;
}

TEST(EventDecoder, DecodesHandWrittenBytes) {
  // Record.event (field 5, length-delimited: tag 5 << 3 | 2 = 0x2A), 6 bytes of Event:
  //   kind = ALLOC:        tag 1 << 3 | 0 = 0x08, value 1
  //   time_delta_ns = -3:  tag 4 << 3 = 0x20, zigzag(-3) = 2 * 3 - 1 = 5
  //   device = -1:         tag 6 << 3 = 0x30, zigzag(-1) = 1
  const std::string bytes = {0x2A, 0x06, 0x08, 0x01, 0x20, 0x05, 0x30, 0x01};
  EventFields event;
  ASSERT_TRUE(decode(bytes, event));
  EXPECT_EQ(event.kind(), proto::ALLOC);
  EXPECT_EQ(event.time_delta_ns(), -3);
  EXPECT_EQ(event.device(), -1);
  EXPECT_EQ(event.address(), 0u);
  EXPECT_FALSE(event.has_process_used_bytes());
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

  e.set_time_delta_us(-5);

  EventFields reused;
  ASSERT_TRUE(decode(full.SerializeAsString(), reused));
  EXPECT_EQ(to_proto_event(reused).SerializeAsString(), full.event().SerializeAsString());
  EXPECT_TRUE(reused.has_process_used_bytes());
  EXPECT_EQ(reused.process_used_bytes(), 0u);
  EXPECT_EQ(reused.time_delta_ns(), -1234567890123);
  EXPECT_EQ(reused.time_delta_us(), -5);
  EXPECT_EQ(reused.tid(), 4000000000u);
  EXPECT_EQ(reused.device(), -7);
  EXPECT_EQ(reused.result(), -2);
  EXPECT_EQ(reused.stream(), 0xffffffffffffffffull);
  EXPECT_EQ(reused.memory(), proto::MEMORY_MANAGED);
  EXPECT_EQ(reused.other_processes_used_bytes(), 8000u);
  EXPECT_EQ(reused.context(), 9000u);

  // The next, smaller event leaves nothing of the previous one behind.
  proto::Record small;
  small.mutable_event()->set_address(0x1000);
  ASSERT_TRUE(decode(small.SerializeAsString(), reused));
  EXPECT_EQ(to_proto_event(reused).SerializeAsString(), small.event().SerializeAsString());
  EXPECT_EQ(reused.stack_id(), 0u);
  EXPECT_EQ(reused.device(), 0);
  EXPECT_FALSE(reused.has_process_used_bytes());
}

TEST(EventDecoder, ReadsAnEventOfMoreThan127Bytes) {
  // kind (2 bytes), eight 64-bit fields numbered below 16 at their largest (one-byte tag, 10-byte
  // varint: 8 * 11 = 88 bytes) and four numbered 16 and above (two-byte tag: 4 * 12 = 48 bytes):
  // 2 + 88 + 48 = 138 bytes, whose length takes two bytes (138 = 0x8A 0x01), which the decoder's
  // one-byte shortcut must not take for the whole length.
  proto::Record record;
  proto::Event& e = *record.mutable_event();
  e.set_kind(proto::ALLOC);
  for (auto set :
       {&proto::Event::set_stream, &proto::Event::set_address, &proto::Event::set_size, &proto::Event::set_stack_id,
        &proto::Event::set_device_free_bytes, &proto::Event::set_device_total_bytes, &proto::Event::set_handle,
        &proto::Event::set_graph, &proto::Event::set_capture_id, &proto::Event::set_allocator_allocated_bytes,
        &proto::Event::set_allocator_reserved_bytes, &proto::Event::set_context})
    (e.*set)(~uint64_t{0});
  const std::string bytes = record.SerializeAsString();
  ASSERT_EQ(bytes.size(), 3u + 138u);  // tag 0x2A, the two length bytes, the event
  EXPECT_EQ(bytes[1], char(0x8A));
  EventFields event;
  ASSERT_TRUE(decode(bytes, event));
  EXPECT_EQ(event.context(), ~uint64_t{0});
  EXPECT_EQ(event.kind(), proto::ALLOC);
}

TEST(EventDecoder, RefusesWhatItDoesNotKnow) {
  EventFields record;
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
  EXPECT_EQ(record.stream(), 1ull << 63);
}

TEST(EventDecoder, TakesEachFieldsTagAsProtobufDoes) {
  EventFields event;
  proto::Record parsed;
  // kind = 1 (tag 0x08, value 0x01), then the tag of layer (0x10) as the record's last byte: a tag with
  // no value. The 0x01 bytes after the record would complete it if the decoder read on.
  const std::string lone_tag = {0x2A, 0x03, 0x08, 0x01, 0x10};
  EXPECT_FALSE(decode(lone_tag, event));
  EXPECT_FALSE(parsed.ParseFromString(lone_tag));
  // Field number 0 (tag 0x00, value 1), which protobuf refuses: the decoder must too.
  const std::string field_zero = {0x2A, 0x02, 0x00, 0x01};
  EXPECT_FALSE(decode(field_zero, event));
  EXPECT_FALSE(parsed.ParseFromString(field_zero));
  // kind (field 1) with wire type 1 (64-bit, tag 0x09) and its 8 bytes: a one-byte tag the decoder's
  // one-byte test must leave to the parser.
  const std::string fixed64 = {0x2A, 0x09, 0x09, 1, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(decode(fixed64, event));
  // kind's tag written in two bytes (0x88 0x00: 8, field 1, varint), value 2: protobuf reads it as kind,
  // and so must the decoder (decode() compares the two).
  ASSERT_TRUE(decode(std::string{0x2A, 0x03, char(0x88), 0x00, 0x02}, event));
  EXPECT_EQ(event.kind(), proto::FREE);
  // The same two-byte tag as the record's last bytes, no value after it.
  EXPECT_FALSE(decode(std::string{0x2A, 0x04, 0x08, 0x01, char(0x88), 0x00}, event));
}

// Fields 16-23 have two-byte tags: (field << 3) = 128-184 is 0x80 | (field << 3 & 0x7f), then 0x01;
// the decoder takes them in one test of the first byte and one of the second (event_decoder.h).
TEST(EventDecoder, TakesTwoByteTagsOfFields16To23AsProtobufDoes) {
  EventFields event;
  for (uint32_t field = 16; field <= 23; ++field) {
    SCOPED_TRACE("field " + std::to_string(field));
    const char first = char(field << 3);  // 16 << 3 = 128 = 0x80 ... 23 << 3 = 184 = 0xB8
    // A one-byte value, 5, then a two-byte one, 300 = 0xAC 0x02 (0x2C + 2 * 128), each followed by kind
    // = 1 (0x08 0x01) so that the field is not the last; decode() compares each with the parser.
    ASSERT_TRUE(decode(std::string{0x2A, 0x05, first, 0x01, 0x05, 0x08, 0x01}, event));
    EXPECT_EQ(event.values[field], field == EventFields::kTimeDeltaUs ? uint64_t(-3) : 5u);  // zigzag 5 = -3
    EXPECT_EQ(event.kind(), proto::ALLOC);
    ASSERT_TRUE(decode(std::string{0x2A, 0x06, first, 0x01, char(0xAC), 0x02, 0x08, 0x01}, event));
    EXPECT_EQ(event.values[field], field == EventFields::kTimeDeltaUs ? 150u : 300u);  // zigzag 300 = 150
  }
  // Field 24 (tag 24 << 3 = 192 = 0xC0 0x01): bit 0x40 of the first byte, a field Event does not have.
  EXPECT_FALSE(decode(std::string{0x2A, 0x03, char(0xC0), 0x01, 0x01}, event));
  // Field 31, the last with a two-byte tag (248 = 0xF8 0x01).
  EXPECT_FALSE(decode(std::string{0x2A, 0x03, char(0xF8), 0x01, 0x01}, event));
  // Field 23 with wire type 1 (0xB9 0x01) and its 8 bytes.
  EXPECT_FALSE(decode(std::string{0x2A, 0x0A, char(0xB9), 0x01, 1, 0, 0, 0, 0, 0, 0, 0}, event));
  // Field 23's tag in three bytes (0xB8 0x81 0x00: 0x38 + 1 * 128 = 184): not the second byte the
  // two-byte test takes, read by the general path as protobuf reads it. zigzag 4 = 2.
  ASSERT_TRUE(decode(std::string{0x2A, 0x04, char(0xB8), char(0x81), 0x00, 0x04}, event));
  EXPECT_EQ(event.time_delta_us(), 2);
  // Field 23's tag as the record's last bytes, no value: the 0x01 after the record would be one.
  EXPECT_FALSE(decode(std::string{0x2A, 0x04, 0x08, 0x01, char(0xB8), 0x01}, event));
  // ... and with a value whose continuation bit runs past the record.
  EXPECT_FALSE(decode(std::string{0x2A, 0x05, 0x08, 0x01, char(0xB8), 0x01, char(0x80)}, event));
}

// Every varint length, 1 to 10 bytes, at both ends of its range: 2^7k is the first value of k + 1
// bytes and 2^7k - 1 the last of k; with every 7-bit group all ones or all zeros a wrong group shows.
TEST(EventDecoder, ReadsVarintsOfEveryLengthAsProtobufDoes) {
  for (int k = 0; k <= 9; ++k) {
    for (uint64_t value : {(uint64_t{1} << (7 * k)) - 1, uint64_t{1} << (7 * k), ~uint64_t{0}}) {
      SCOPED_TRACE("value " + std::to_string(value));
      proto::Record record;
      record.mutable_event()->set_stream(value);
      record.mutable_event()->set_stack_id(value ^ 0x5555555555555555);
      EventFields event;
      ASSERT_TRUE(decode(record.SerializeAsString(), event));  // compares with protobuf's parser
      EXPECT_EQ(event.stream(), value);
      EXPECT_EQ(event.stack_id(), value ^ 0x5555555555555555);
    }
  }
}

TEST(EventDecoder, ReadsSignedFieldsAsProtobufDoes) {
  // device (sint32, field 6, tag 0x30) as the 5-byte varint of zigzag value 0xFFFFFFFF, which is
  // -2^31 (zigzag: odd 2k+1 -> -(k+1), k = 0x7FFFFFFF); then as a 10-byte varint whose low 32 bits
  // are 3 (zigzag -2) and whose high bits protobuf ignores for a sint32:
  // 0x83 0x80 0x80 0x80 0x80 0x80 0x80 0x80 0x80 0x01 = 3 + 2^63.
  std::string min32 = {0x2A, 0x06, 0x30, char(0xFF), char(0xFF), char(0xFF), char(0xFF), 0x0F};
  EventFields event;
  ASSERT_TRUE(decode(min32, event));
  EXPECT_EQ(event.device(), INT32_MIN);
  std::string wide = {0x2A, 0x0B, 0x30, char(0x83)};
  wide += std::string(8, char(0x80)) + '\x01';
  ASSERT_TRUE(decode(wide, event));
  EXPECT_EQ(event.device(), -2);
  // time_delta_us (sint64, field 23: tag 23 << 3 = 184 = varint 0xB8 0x01), zigzag 1 = -1, and
  // time_delta_ns (field 4, tag 0x20) zigzag 4 = 2.
  ASSERT_TRUE(decode(std::string{0x2A, 0x05, char(0xB8), 0x01, 0x01, 0x20, 0x04}, event));
  EXPECT_EQ(event.time_delta_us(), -1);
  EXPECT_EQ(event.time_delta_ns(), 2);
  // A field given twice keeps its last value, as protobuf's parser: size (tag 0x48) 5 then 7.
  ASSERT_TRUE(decode(std::string{0x2A, 0x04, 0x48, 0x05, 0x48, 0x07}, event));
  EXPECT_EQ(event.size(), 7u);
}

// decode_short_event_record, the record split loop's decoder, must accept what decode_event_record
// accepts with the same fields, or refuse (the parser then reads the record, as it reads everything
// decode_event_record refuses). For the tracer's events it must accept.
TEST(EventDecoder, ShortRecordDecoderAgreesWithTheGeneralOne) {
  proto::Record tracer_event;
  proto::Event& e = *tracer_event.mutable_event();
  e.set_kind(proto::ALLOC);
  e.set_layer(proto::LAYER_BLOCK);
  e.set_api(proto::TORCH_ALLOCATOR);
  e.set_device(3);
  e.set_address(0x7f0000001000);
  e.set_size(4096);
  e.set_stack_id(17);
  e.set_time_delta_us(-2);
  const std::vector<std::string> records = {
      tracer_event.SerializeAsString(),
      {0x2A, 0x00},                          // an empty Event
      {0x2A},                                // one byte: the tag alone
      {0x2A, 0x03, 0x08, 0x01},              // the Event's length says 3, 2 follow
      {0x2A, 0x01, 0x08, 0x01},              // ... says 1, 2 follow
      {0x12, 0x02, 0x08, 0x01},              // another record kind (field 2)
      {0x2A, char(0x82), 0x00, 0x08, 0x01},  // the Event's length in two bytes
      {0x2A, 0x02, 0x00, 0x01},              // field 0
  };
  for (const std::string& bytes : records) {
    SCOPED_TRACE(testing::PrintToString(bytes));
    // 9 bytes of 0x01 after the record, as decode() pads it.
    const std::string padded = bytes + std::string(9, '\x01');
    EventFields general, short_path;
    bool general_ok = decode_event_record(padded.data(), bytes.size(), general, 9);
    bool short_ok = decode_short_event_record(padded.data(), bytes.size(), short_path);
    if (short_ok) {
      EXPECT_TRUE(general_ok);
      EXPECT_EQ(to_proto_event(short_path).SerializeAsString(), to_proto_event(general).SerializeAsString());
    }
  }
  EventFields event;
  const std::string padded = records[0] + std::string(9, '\x01');
  ASSERT_TRUE(decode_short_event_record(padded.data(), records[0].size(), event));
  EXPECT_EQ(to_proto_event(event).SerializeAsString(), e.SerializeAsString());
}

// Version 3 (kCarrySticky): the reused event keeps the sticky fields (2, 3, 5, 6, 7) the record leaves
// out, unmarked; every other field, and those five without the carry, go back to 0. Every field starts
// at 10 * field + 1 (present) so that a slot the reset missed shows; the record is kind = FREE (0x08
// 0x02) and tid = 4 (0x28 0x04), so tid is the record's and the other four are carried.
TEST(EventDecoder, CarriesTheStickyFieldsARecordLeavesOut) {
  const std::string bytes = {0x2A, 0x04, 0x08, 0x02, 0x28, 0x04};
  const std::string padded = bytes + std::string(9, '\x01');
  for (bool carry : {false, true}) {
    for (bool short_record : {false, true}) {
      SCOPED_TRACE(std::string(carry ? "carry" : "no carry") + (short_record ? ", short" : ", general"));
      EventFields event;
      for (uint32_t f = 1; f <= EventFields::kLastField; ++f) event.set(EventFields::Field(f), 10 * f + 1);
      bool ok = short_record ? (carry ? decode_short_event_record<true>(padded.data(), bytes.size(), event)
                                      : decode_short_event_record<false>(padded.data(), bytes.size(), event))
                             : (carry ? decode_event_record<true>(bytes.data(), bytes.size(), event)
                                      : decode_event_record<false>(bytes.data(), bytes.size(), event));
      ASSERT_TRUE(ok);
      for (uint32_t f = 1; f <= EventFields::kLastField; ++f) {
        SCOPED_TRACE("field " + std::to_string(f));
        bool sticky = (EventFields::kStickyFields >> f & 1) != 0;
        uint64_t expected = f == EventFields::kKind ? 2 : f == EventFields::kTid ? 4 : carry && sticky ? 10 * f + 1 : 0;
        EXPECT_EQ(event.values[f], expected);
        EXPECT_EQ(event.has(EventFields::Field(f)), f == EventFields::kKind || f == EventFields::kTid);
      }
    }
  }
  // Device (6) carried as decoded: 61 as a decoded sint32 stays 61, not zigzag(61) = -31.
  EventFields event;
  event.set(EventFields::kDevice, 61);
  ASSERT_TRUE(decode_event_record<true>(bytes.data(), bytes.size(), event));
  EXPECT_EQ(event.device(), 61);
}

// The protobuf path's version-3 rule: each sticky field the message has is its own (an explicit 0
// included), each it leaves out the previous Event's.
TEST(EventFields, FromProtobufWithAPreviousEventKeepsItsAbsentStickyFields) {
  EventFields previous;
  previous.set(EventFields::kLayer, 2);
  previous.set(EventFields::kApi, 50);
  previous.set(EventFields::kTid, 7);
  previous.set(EventFields::kDevice, 3);
  previous.set(EventFields::kStream, 0x50);
  previous.set(EventFields::kSize, 512);  // not sticky: not carried
  proto::Event e;
  e.set_kind(proto::FREE);
  e.set_device(0);
  e.set_tid(9);
  EventFields fields(e, previous);
  EXPECT_EQ(fields.layer(), proto::LAYER_BLOCK);
  EXPECT_EQ(fields.api(), proto::TORCH_ALLOCATOR);
  EXPECT_EQ(fields.tid(), 9u);
  EXPECT_EQ(fields.device(), 0);
  EXPECT_EQ(fields.stream(), 0x50u);
  EXPECT_EQ(fields.size(), 0u);
  EXPECT_TRUE(fields.has(EventFields::kDevice));
  EXPECT_FALSE(fields.has(EventFields::kLayer));
  // As a message: the carried fields written (non-zero), the explicit zero device kept present.
  proto::Event message = to_proto_event(fields);
  EXPECT_TRUE(message.has_layer() && message.has_api() && message.has_stream() && message.has_device());
  EXPECT_EQ(message.device(), 0);
}

TEST(EventFields, FromAndToProtobufKeepEveryField) {
  proto::Event e;
  e.set_kind(proto::FREE);
  e.set_device(-3);
  e.set_time_delta_ns(-9);
  e.set_result(-4);
  e.set_allocator_reserved_bytes(0);  // present though zero
  e.set_context(11);
  EventFields fields(e);
  EXPECT_EQ(fields.kind(), proto::FREE);
  EXPECT_EQ(fields.device(), -3);
  EXPECT_EQ(fields.time_delta_ns(), -9);
  EXPECT_EQ(fields.result(), -4);
  EXPECT_FALSE(fields.has_allocator_allocated_bytes());
  EXPECT_TRUE(fields.has_allocator_reserved_bytes());
  EXPECT_EQ(fields.context(), 11u);
  EXPECT_EQ(to_proto_event(fields).SerializeAsString(), e.SerializeAsString());
}

}  // namespace
}  // namespace memtrace
