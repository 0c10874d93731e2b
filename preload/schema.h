// The enum values of proto/memtrace.proto, for the tracer (which does not include generated code).
// tests/preload/proto_writer_test.cc checks every value against the generated enums.
#pragma once
#include <cstdint>

namespace memtrace {

enum class Layer : uint8_t { kUnknown = 0, kDriver = 1, kBlock = 2 };

enum class EventKind : uint8_t {
  kUnknown = 0,
  kAlloc = 1,
  kFree = 2,
  kOom = 3,
  kMap = 4,
  kUnmap = 5,
  kAddressReserve = 6,
  kAddressFree = 7,
  kPythonFinalizing = 8,
};

enum class Api : uint8_t {
  kUnknown = 0,
  kCudaMalloc = 1,
  kCudaFree = 2,
  kCudaMallocAsync = 3,
  kCudaFreeAsync = 4,
  kCudaMallocFromPoolAsync = 5,
  kCudaMallocPitch = 6,
  kCudaMallocManaged = 7,
  kCuMemAlloc = 20,
  kCuMemFree = 21,
  kCuMemAllocPitch = 22,
  kCuMemAllocAsync = 23,
  kCuMemFreeAsync = 24,
  kCuMemAllocFromPoolAsync = 25,
  kCuMemAllocManaged = 26,
  kCuMemCreate = 30,
  kCuMemRelease = 31,
  kCuMemMap = 32,
  kCuMemUnmap = 33,
  kCuMemAddressReserve = 34,
  kCuMemAddressFree = 35,
  kTorchAllocator = 50,
};

enum class NoticeCode : uint8_t {
  kUnknown = 0,
  kPythonUnsupported = 1,
  kTorchHookMissing = 2,
  kEventsDropped = 3,
  kWriteFailed = 4,
  kStacksNotRecorded = 5,
};

// Field numbers of the Record oneof and of each message, as in proto/memtrace.proto.
namespace field {
enum RecordKind : uint32_t { kStart = 1, kModule = 2, kPythonFrame = 3, kStack = 4, kEvent = 5, kThread = 6,
                             kNotice = 7, kEnd = 8 };
}  // namespace field

// Bit 63 of a Stack frame marks a PythonFrame id (see Stack in memtrace.proto).
constexpr uint64_t kPythonFrameBit = uint64_t{1} << 63;

}  // namespace memtrace
