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
  kPoolReserved = 9,
  kDeviceUsage = 10,
  kGraphCaptured = 11,
  kGraphInstantiate = 12,
  kGraphLaunch = 13,
  kContextDestroy = 14,
};

enum class Memory : uint8_t {
  kDevice = 0,
  kHostPinned = 1,
  kHostRegistered = 2,
  kManaged = 3,
  kArray = 4,
  kImported = 5,
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
  kCudaMallocHost = 8,
  kCudaHostAlloc = 9,
  kCudaFreeHost = 10,
  kCudaHostRegister = 11,
  kCudaHostUnregister = 12,
  kCudaMallocArray = 13,
  kCudaMalloc3DArray = 14,
  kCudaMallocMipmappedArray = 15,
  kCudaFreeArray = 16,
  kCudaFreeMipmappedArray = 17,
  kCudaMalloc3D = 18,
  kCudaIpcOpenMemHandle = 19,
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
  kCuMemAllocHost = 36,
  kCuMemHostAlloc = 37,
  kCuMemFreeHost = 38,
  kCuMemHostRegister = 39,
  kCuMemHostUnregister = 40,
  kCuArrayCreate = 41,
  kCuArray3DCreate = 42,
  kCuArrayDestroy = 43,
  kCuMipmappedArrayCreate = 44,
  kCuMipmappedArrayDestroy = 45,
  kCuIpcOpenMemHandle = 46,
  kCuIpcCloseMemHandle = 47,
  kCuExternalMemoryGetMappedBuffer = 48,
  kCuMemImportFromShareableHandle = 49,
  kTorchAllocator = 50,
  kCudaIpcCloseMemHandle = 60,
  kCudaMemPoolTrimTo = 61,
  kCudaStreamSynchronize = 62,
  kCudaDeviceSynchronize = 63,
  kCudaDeviceReset = 64,
  kCudaStreamEndCapture = 65,
  kCudaGraphInstantiate = 66,
  kCudaGraphLaunch = 67,
  kCudaGraphAddMemAllocNode = 68,
  kCudaGraphAddMemFreeNode = 69,
  kCudaDeviceGraphMemTrim = 70,
  kCudaEventSynchronize = 71,
  kCudaMemPoolCreate = 72,
  kCudaMemPoolDestroy = 73,
  kCuMemPoolTrimTo = 80,
  kCuMemPoolCreate = 81,
  kCuMemPoolDestroy = 82,
  kCuStreamSynchronize = 83,
  kCuCtxSynchronize = 84,
  kCuEventSynchronize = 85,
  kCuCtxDestroy = 86,
  kCuDevicePrimaryCtxReset = 87,
  kCuDevicePrimaryCtxRelease = 88,
  kCuStreamEndCapture = 89,
  kCuGraphInstantiate = 90,
  kCuGraphLaunch = 91,
  kCuGraphAddMemAllocNode = 92,
  kCuGraphAddMemFreeNode = 93,
  kCuDeviceGraphMemTrim = 94,
  kNvmlSample = 100,
};

enum class NoticeCode : uint8_t {
  kUnknown = 0,
  kPythonUnsupported = 1,
  kTorchHookMissing = 2,
  kEventsDropped = 3,
  kWriteFailed = 4,
  kStacksNotRecorded = 5,
  kCuptiBusy = 6,
  kAttachIncomplete = 7,
};

// TraceStart.Origin: how the trace began.
enum class TraceOrigin : uint8_t { kLaunch = 0, kAttachDormant = 1, kAttachInjected = 2, kSnapshot = 3 };

// TraceStart.JobIdSource: which environment variable TraceStart.job_id came from.
enum class JobIdSource : uint8_t { kNone = 0, kSlurmJobId = 1, kTorchelasticRunId = 2 };

// RangeEvent.Kind: what an NVTX call did.
enum class RangeKind : uint8_t { kUnknown = 0, kPush = 1, kPop = 2, kStart = 3, kEnd = 4, kMark = 5 };

// Field numbers of the Record oneof and of each message, as in proto/memtrace.proto.
namespace field {
enum RecordKind : uint32_t {
  kStart = 1,
  kModule = 2,
  kPythonFrame = 3,
  kStack = 4,
  kEvent = 5,
  kThread = 6,
  kNotice = 7,
  kEnd = 8,
  kDevice = 9,
  kRangeName = 10,
  kRangeEvent = 11,
  kNvmlProcesses = 12,
  kLiveAtAttach = 13,
  kAttachBaseline = 14
};
}  // namespace field

// Bit 63 of a Stack frame marks a PythonFrame id (see Stack in memtrace.proto).
constexpr uint64_t kPythonFrameBit = uint64_t{1} << 63;

}  // namespace memtrace
