// Shared by the fake driver's source files (libcuda.so.1). Not a public interface.
#pragma once
#include <cuda.h>

#include <cstdint>

// cuda.h declares these handle types but leaves them opaque; the fake driver gives them a body.
struct CUctx_st {
  int device;
};
struct CUmemPoolHandle_st {
  int device;
};
struct CUstream_st {
  CUcontext context;  // current when the stream was made: the stream's device is its device
};

// CUDA 7.0's cuDevicePrimaryCtxReset, exported under the name that cuda.h #defines to the _v2 function (the
// same argument). cuGetProcAddress hands it out below 11000, where the CUDA 13 runtime asks for it.
#undef cuDevicePrimaryCtxReset
extern "C" CUresult cuDevicePrimaryCtxReset(CUdevice device);
// CUDA 9.2's cuDeviceGetUuid, likewise #defined to its _v2 (the same arguments).
#undef cuDeviceGetUuid
extern "C" CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device);

namespace fakecuda {

// The calling thread's current device, from its current context (cuCtxSetCurrent). Like the real
// driver: CUDA_ERROR_NOT_INITIALIZED before cuInit, CUDA_ERROR_INVALID_CONTEXT without a context.
CUresult current_device(int* device);
// The calling thread's current context; null without one.
CUcontext current_context();
// The context of `stream` (driver_context.cc): for a stream from cuStreamCreate, the context current when it
// was made, whichever is current now; for any other handle (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, and
// the made-up values tests pass), the current context. A stream-ordered allocation comes from the pool of
// its stream's device, as CUDA's cuMemAllocAsync documents.
CUcontext stream_context(CUstream stream);
bool driver_initialized();
// The primary context / default memory pool of a valid device (one static object each).
CUcontext primary_context(int device);
CUmemoryPool default_pool(int device);

// Process teardown, as the real driver does it: with FAKECUDA_DEINIT_AT_EXIT=1, cuInit registers an atexit
// handler that destroys every context; from then on a free releases the memory (it went with the context)
// and answers CUDA_ERROR_DEINITIALIZED. Frees from handlers registered before cuInit (static destructors of
// objects built before the first CUDA call) run after it and see that answer.
void teardown_register_at_init();
bool driver_torn_down();

// With FAKECUDA_AFTER_FREE_HOOK=1, every successful free calls the program's exported
// `extern "C" void fakecuda_test_after_free(uintptr_t address)` after the memory is released and before
// the free returns: a test program uses it to run another thread's allocation at that exact moment.
void run_after_free_hook(uintptr_t address);

// Stream capture (driver_graphs.cc). Streams are plain handles to the double; capture is tracked per handle
// value. A stream-ordered allocation on a capturing stream becomes a memory node of the graph being built
// (its address is reserved, nothing is charged) and a stream-ordered free on it frees nothing.
// `per_thread_stream`: the call came through a _ptsz entry point, where stream 0 is the per-thread stream.
bool stream_capturing(CUstream stream, bool per_thread_stream);

}  // namespace fakecuda
