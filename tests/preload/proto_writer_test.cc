// The tracer writes records with its own encoder (preload/record/proto_writer.h); the analyzer reads them with the
// classes generated from proto/memtrace.proto. These tests encode with one and decode with the other.
#include "record/proto_writer.h"

#include <gtest/gtest.h>

#include <string>

#include "memtrace.pb.h"
#include "record/nvml_list.h"
#include "record/schema.h"

namespace memtrace {
namespace {

// Wraps `inner` as the Record oneof member `kind`, the way preload/record/recorder_state.h does (without the
// stream length).
std::string as_record(uint32_t kind, const ProtoWriter& inner) {
  uint8_t buf[4096];
  ProtoWriter outer(buf, buf + sizeof buf);
  outer.message(kind, inner);
  return std::string(reinterpret_cast<char*>(buf), outer.size());
}

TEST(ProtoWriter, EventRoundTripsThroughGeneratedParser) {
  uint8_t buf[256];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(EventKind::kAlloc));
  w.uint(2, static_cast<uint64_t>(Layer::kBlock));
  w.uint(3, static_cast<uint64_t>(Api::kTorchAllocator));
  w.sint(4, -1500);  // a negative delta must survive zigzag
  w.uint(5, 4242);
  w.sint(6, -1);
  w.uint(7, 0x7f00ULL);
  w.uint(8, 0x7f1234560000ULL);
  w.uint(9, 1ULL << 40);
  w.sint(10, 2);
  w.uint(11, 17);
  w.uint(12, 1000);
  w.uint(13, 2097152);
  w.uint(14, 5);
  w.uint(15, 6);
  w.uint(16, 99);
  ASSERT_TRUE(w.ok());

  proto::Record record;
  ASSERT_TRUE(record.ParseFromString(as_record(field::kEvent, w)));
  ASSERT_TRUE(record.has_event());
  const proto::Event& e = record.event();
  EXPECT_EQ(e.kind(), proto::ALLOC);
  EXPECT_EQ(e.layer(), proto::LAYER_BLOCK);
  EXPECT_EQ(e.api(), proto::TORCH_ALLOCATOR);
  EXPECT_EQ(e.time_delta_ns(), -1500);
  EXPECT_EQ(e.tid(), 4242u);
  EXPECT_EQ(e.device(), -1);
  EXPECT_EQ(e.stream(), 0x7f00u);
  EXPECT_EQ(e.address(), 0x7f1234560000u);
  EXPECT_EQ(e.size(), 1ULL << 40);
  EXPECT_EQ(e.result(), 2);
  EXPECT_EQ(e.stack_id(), 17u);
  EXPECT_EQ(e.allocator_allocated_bytes(), 1000u);
  EXPECT_EQ(e.allocator_reserved_bytes(), 2097152u);
  EXPECT_EQ(e.device_free_bytes(), 5u);
  EXPECT_EQ(e.device_total_bytes(), 6u);
  EXPECT_EQ(e.handle(), 99u);
}

// proto3 `optional` fields carry presence: a zero written with optional_uint must read back as present
// and zero, one not written as absent.
TEST(ProtoWriter, OptionalFieldsKeepPresenceOfZero) {
  uint8_t buf[64];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(EventKind::kDeviceUsage));
  w.optional_uint(20, true, 0);
  w.optional_uint(21, false, 123);
  w.uint(17, static_cast<uint64_t>(Memory::kHostPinned));
  w.uint(18, 0xabc);
  w.uint(19, 7);
  proto::Record record;
  ASSERT_TRUE(record.ParseFromString(as_record(field::kEvent, w)));
  const proto::Event& e = record.event();
  EXPECT_EQ(e.kind(), proto::DEVICE_USAGE);
  EXPECT_TRUE(e.has_process_used_bytes());
  EXPECT_EQ(e.process_used_bytes(), 0u);
  EXPECT_FALSE(e.has_other_processes_used_bytes());
  EXPECT_EQ(e.memory(), proto::MEMORY_HOST_PINNED);
  EXPECT_EQ(e.graph(), 0xabcu);
  EXPECT_EQ(e.capture_id(), 7u);
}

TEST(ProtoWriter, StackWithPythonFramesRoundTrips) {
  const uint64_t frames[] = {0x401000, kPythonFrameBit | 3, 0xffffffffffffULL, kPythonFrameBit | 1};
  uint8_t buf[256];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, 7);
  w.packed_uints(2, frames, 4);
  proto::Record record;
  ASSERT_TRUE(record.ParseFromString(as_record(field::kStack, w)));
  ASSERT_TRUE(record.has_stack());
  ASSERT_EQ(record.stack().frames_size(), 4);
  EXPECT_EQ(record.stack().id(), 7u);
  for (int i = 0; i < 4; i++) EXPECT_EQ(record.stack().frames(i), frames[i]) << i;
}

// NvmlProcesses as the recorder encodes it (record/nvml_list.h): a figure of 0 is present, an unknown one absent,
// and the most processes with the largest values fit in kMaxNvmlProcessesRecordBytes.
TEST(ProtoWriter, NvmlProcessesRoundTrip) {
  const NvmlOtherProcess others[] = {{17, true, 0}, {4242, true, 1ULL << 30}, {90000, false, 0}};
  uint8_t buf[kMaxNvmlProcessesRecordBytes];
  ProtoWriter w(buf, buf + sizeof buf);
  encode_nvml_processes(1, others, 3, w);
  ASSERT_TRUE(w.ok());
  proto::Record record;
  ASSERT_TRUE(record.ParseFromString(as_record(field::kNvmlProcesses, w)));
  ASSERT_EQ(record.kind_case(), proto::Record::kNvmlProcesses);
  const proto::NvmlProcesses& list = record.nvml_processes();
  EXPECT_EQ(list.device(), 1u);
  ASSERT_EQ(list.processes_size(), 3);
  EXPECT_EQ(list.processes(0).pid(), 17u);
  EXPECT_TRUE(list.processes(0).has_used_bytes());
  EXPECT_EQ(list.processes(0).used_bytes(), 0u);
  EXPECT_EQ(list.processes(1).pid(), 4242u);
  EXPECT_EQ(list.processes(1).used_bytes(), 1ULL << 30);
  EXPECT_EQ(list.processes(2).pid(), 90000u);
  EXPECT_FALSE(list.processes(2).has_used_bytes());

  NvmlOtherProcess largest[kMaxNvmlProcesses];
  for (NvmlOtherProcess& p : largest) p = {UINT32_MAX, true, UINT64_MAX};
  ProtoWriter full(buf, buf + sizeof buf);
  encode_nvml_processes(63, largest, kMaxNvmlProcesses, full);
  EXPECT_TRUE(full.ok());
}

TEST(ProtoWriter, StringsAndBytes) {
  const uint8_t build_id[] = {0xde, 0xad, 0xbe, 0xef};
  uint8_t buf[256];
  ProtoWriter w(buf, buf + sizeof buf);
  w.string(1, "/usr/lib/libc10_cuda.so");
  w.uint(2, 0x7f0000000000ULL);
  w.bytes(5, build_id, sizeof build_id);
  proto::Record record;
  ASSERT_TRUE(record.ParseFromString(as_record(field::kModule, w)));
  EXPECT_EQ(record.module().path(), "/usr/lib/libc10_cuda.so");
  EXPECT_EQ(record.module().load_address(), 0x7f0000000000u);
  EXPECT_EQ(record.module().build_id(), std::string("\xde\xad\xbe\xef", 4));
}

TEST(ProtoWriter, OverflowWritesNothingMoreAndReportsIt) {
  uint8_t buf[8];
  ProtoWriter w(buf, buf + sizeof buf);
  w.string(2, "a string longer than eight bytes");
  EXPECT_FALSE(w.ok());
}

TEST(ProtoWriter, VarintSizes) {
  EXPECT_EQ(ProtoWriter::varint_size(0), 1u);
  EXPECT_EQ(ProtoWriter::varint_size(127), 1u);
  EXPECT_EQ(ProtoWriter::varint_size(128), 2u);
  EXPECT_EQ(ProtoWriter::varint_size(16383), 2u);
  EXPECT_EQ(ProtoWriter::varint_size(16384), 3u);
  EXPECT_EQ(ProtoWriter::varint_size(~0ULL), 10u);
}

// schema.h restates the .proto's enums for the tracer; they must not drift apart.
TEST(Schema, EnumsMatchTheProto) {
  EXPECT_EQ(static_cast<int>(EventKind::kPythonFinalizing), proto::PYTHON_FINALIZING);
  EXPECT_EQ(static_cast<int>(EventKind::kAddressFree), proto::ADDRESS_FREE);
  EXPECT_EQ(static_cast<int>(EventKind::kUnmap), proto::UNMAP);
  EXPECT_EQ(static_cast<int>(EventKind::kPoolReserved), proto::POOL_RESERVED);
  EXPECT_EQ(static_cast<int>(EventKind::kDeviceUsage), proto::DEVICE_USAGE);
  EXPECT_EQ(static_cast<int>(EventKind::kGraphCaptured), proto::GRAPH_CAPTURED);
  EXPECT_EQ(static_cast<int>(EventKind::kGraphInstantiate), proto::GRAPH_INSTANTIATE);
  EXPECT_EQ(static_cast<int>(EventKind::kGraphLaunch), proto::GRAPH_LAUNCH);
  EXPECT_EQ(static_cast<int>(EventKind::kContextDestroy), proto::CONTEXT_DESTROY);
  EXPECT_EQ(static_cast<int>(Memory::kDevice), proto::MEMORY_DEVICE);
  EXPECT_EQ(static_cast<int>(Memory::kHostPinned), proto::MEMORY_HOST_PINNED);
  EXPECT_EQ(static_cast<int>(Memory::kHostRegistered), proto::MEMORY_HOST_REGISTERED);
  EXPECT_EQ(static_cast<int>(Memory::kManaged), proto::MEMORY_MANAGED);
  EXPECT_EQ(static_cast<int>(Memory::kArray), proto::MEMORY_ARRAY);
  EXPECT_EQ(static_cast<int>(Memory::kImported), proto::MEMORY_IMPORTED);
  EXPECT_EQ(static_cast<int>(Api::kCudaIpcOpenMemHandle), proto::CUDA_IPC_OPEN_MEM_HANDLE);
  EXPECT_EQ(static_cast<int>(Api::kCuMemImportFromShareableHandle), proto::CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE);
  EXPECT_EQ(static_cast<int>(Api::kCudaMemPoolDestroy), proto::CUDA_MEM_POOL_DESTROY);
  EXPECT_EQ(static_cast<int>(Api::kCuDeviceGraphMemTrim), proto::CU_DEVICE_GRAPH_MEM_TRIM);
  EXPECT_EQ(static_cast<int>(Api::kNvmlSample), proto::NVML_SAMPLE);
  EXPECT_EQ(static_cast<int>(Layer::kDriver), proto::LAYER_DRIVER);
  EXPECT_EQ(static_cast<int>(Layer::kBlock), proto::LAYER_BLOCK);
  EXPECT_EQ(static_cast<int>(Api::kCudaMalloc), proto::CUDA_MALLOC);
  EXPECT_EQ(static_cast<int>(Api::kCudaMallocManaged), proto::CUDA_MALLOC_MANAGED);
  EXPECT_EQ(static_cast<int>(Api::kCuMemAllocManaged), proto::CU_MEM_ALLOC_MANAGED);
  EXPECT_EQ(static_cast<int>(Api::kCuMemAddressFree), proto::CU_MEM_ADDRESS_FREE);
  EXPECT_EQ(static_cast<int>(Api::kTorchAllocator), proto::TORCH_ALLOCATOR);
  EXPECT_EQ(static_cast<int>(NoticeCode::kWriteFailed), proto::Notice::WRITE_FAILED);
  EXPECT_EQ(static_cast<int>(NoticeCode::kTorchHookMissing), proto::Notice::TORCH_HOOK_MISSING);
  EXPECT_EQ(field::kEnd, proto::Record::kEndFieldNumber);
  EXPECT_EQ(field::kThread, proto::Record::kThreadFieldNumber);
  EXPECT_EQ(field::kPythonFrame, proto::Record::kPythonFrameFieldNumber);
  EXPECT_EQ(field::kDevice, proto::Record::kDeviceFieldNumber);
  EXPECT_EQ(field::kRangeName, proto::Record::kRangeNameFieldNumber);
  EXPECT_EQ(field::kRangeEvent, proto::Record::kRangeEventFieldNumber);
  EXPECT_EQ(field::kNvmlProcesses, proto::Record::kNvmlProcessesFieldNumber);
  EXPECT_EQ(static_cast<int>(RangeKind::kPush), proto::RangeEvent::PUSH);
  EXPECT_EQ(static_cast<int>(RangeKind::kPop), proto::RangeEvent::POP);
  EXPECT_EQ(static_cast<int>(RangeKind::kStart), proto::RangeEvent::START);
  EXPECT_EQ(static_cast<int>(RangeKind::kEnd), proto::RangeEvent::END);
  EXPECT_EQ(static_cast<int>(RangeKind::kMark), proto::RangeEvent::MARK);
  EXPECT_EQ(static_cast<int>(JobIdSource::kNone), proto::TraceStart::JOB_ID_NONE);
  EXPECT_EQ(static_cast<int>(JobIdSource::kSlurmJobId), proto::TraceStart::SLURM_JOB_ID);
  EXPECT_EQ(static_cast<int>(JobIdSource::kTorchelasticRunId), proto::TraceStart::TORCHELASTIC_RUN_ID);
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {
// The recorder sizes its output exactly (append_record_locked, preload/record/recorder_state.h): a writer whose
// room equals the encoded size must write every byte, tag and length included.
TEST(ProtoWriter, ExactlySizedBufferHoldsTheWholeRecord) {
  uint8_t inner_buf[16];
  ProtoWriter inner(inner_buf, inner_buf + sizeof inner_buf);
  inner.uint(1, 5);  // 08 05
  uint8_t out_buf[4];
  ProtoWriter out(out_buf, out_buf + sizeof out_buf);  // tag + length + 2 bytes = 4
  out.message(8, inner);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out_buf[0], 0x42);  // field 8, length-delimited
  EXPECT_EQ(out_buf[1], 0x02);
  EXPECT_EQ(out_buf[2], 0x08);
  EXPECT_EQ(out_buf[3], 0x05);
}

TEST(ProtoWriter, NothingIsWrittenAfterAnOverflow) {
  uint8_t buf[3] = {0xaa, 0xaa, 0xaa};
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, 1ULL << 30);  // tag (1 byte) fits, the 5-byte value does not
  w.uint(2, 1);           // would fit, but the writer has already failed
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.size(), 1u);  // only the tag: the caller discards a record whose writer is not ok()
  EXPECT_EQ(buf[1], 0xaa);
}
}  // namespace
}  // namespace memtrace
