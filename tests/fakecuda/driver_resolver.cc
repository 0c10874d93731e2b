// cuGetProcAddress / cuGetProcAddress_v2 of the fake driver: resolves a base name ("cuMemAlloc") at a
// CUDA version to the entry point with the ABI of that version ("cuMemAlloc_v2" from 3020), honouring
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ("cuMemAllocAsync" -> "cuMemAllocAsync_ptsz"), like the
// real driver. The CUDA runtime makes all its driver calls through this (see
// docs/cuda-interception.md), including a look-up of "cuGetProcAddress" itself: the
// 4-argument ABI below 12000, the 5-argument one from 12000.
//
// libcuda.so.1 is linked with -Bsymbolic so that the addresses in this table are the driver's own
// functions even when a preloaded library exports the same names.
#include <atomic>
#include <cstring>

#include "device_memory.h"
#include "driver_internal.h"

#undef cuGetProcAddress
extern "C" {
// The pre-12.0 ABI, still exported by the real driver under its plain name.
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
decltype(cuMemAllocAsync) cuMemAllocAsync_ptsz;
decltype(cuMemFreeAsync) cuMemFreeAsync_ptsz;
decltype(cuMemAllocFromPoolAsync) cuMemAllocFromPoolAsync_ptsz;
CUresult cuStreamSynchronize_ptsz(CUstream stream);
decltype(cuStreamBeginCapture_v2) cuStreamBeginCapture_v2_ptsz;
decltype(cuStreamGetCaptureInfo_v3) cuStreamGetCaptureInfo_v3_ptsz;
decltype(cuStreamEndCapture) cuStreamEndCapture_ptsz;
decltype(cuGraphInstantiateWithParams) cuGraphInstantiateWithParams_ptsz;
decltype(cuGraphLaunch) cuGraphLaunch_ptsz;
}

namespace {

struct Entry {
  const char* base_name;
  int min_version;  // first CUDA version (1000 * major + 10 * minor) at which base_name has this ABI
  bool per_thread_stream;
  void* function;
};

#define FAKECUDA_ENTRY(base, version, ptsz, fn) \
  { base, version, ptsz, reinterpret_cast<void*>(&fn) }
const Entry kEntries[] = {
    FAKECUDA_ENTRY("cuGetProcAddress", 11030, false, cuGetProcAddress),
    FAKECUDA_ENTRY("cuGetProcAddress", 12000, false, cuGetProcAddress_v2),
    FAKECUDA_ENTRY("cuInit", 2000, false, cuInit),
    FAKECUDA_ENTRY("cuDriverGetVersion", 2020, false, cuDriverGetVersion),
    FAKECUDA_ENTRY("cuDeviceGetCount", 2000, false, cuDeviceGetCount),
    FAKECUDA_ENTRY("cuDeviceGet", 2000, false, cuDeviceGet),
    FAKECUDA_ENTRY("cuDevicePrimaryCtxRetain", 7000, false, cuDevicePrimaryCtxRetain),
    FAKECUDA_ENTRY("cuCtxSetCurrent", 4000, false, cuCtxSetCurrent),
    FAKECUDA_ENTRY("cuCtxGetCurrent", 4000, false, cuCtxGetCurrent),
    FAKECUDA_ENTRY("cuCtxGetDevice", 2000, false, cuCtxGetDevice),
    FAKECUDA_ENTRY("cuMemGetInfo", 3020, false, cuMemGetInfo_v2),
    FAKECUDA_ENTRY("cuMemAlloc", 3020, false, cuMemAlloc_v2),
    FAKECUDA_ENTRY("cuMemAllocPitch", 3020, false, cuMemAllocPitch_v2),
    FAKECUDA_ENTRY("cuMemFree", 3020, false, cuMemFree_v2),
    FAKECUDA_ENTRY("cuMemAllocManaged", 6000, false, cuMemAllocManaged),
    FAKECUDA_ENTRY("cuMemAllocAsync", 11020, false, cuMemAllocAsync),
    FAKECUDA_ENTRY("cuMemAllocAsync", 11020, true, cuMemAllocAsync_ptsz),
    FAKECUDA_ENTRY("cuMemFreeAsync", 11020, false, cuMemFreeAsync),
    FAKECUDA_ENTRY("cuMemFreeAsync", 11020, true, cuMemFreeAsync_ptsz),
    FAKECUDA_ENTRY("cuMemAllocFromPoolAsync", 11020, false, cuMemAllocFromPoolAsync),
    FAKECUDA_ENTRY("cuMemAllocFromPoolAsync", 11020, true, cuMemAllocFromPoolAsync_ptsz),
    FAKECUDA_ENTRY("cuDeviceGetDefaultMemPool", 11020, false, cuDeviceGetDefaultMemPool),
    FAKECUDA_ENTRY("cuPointerGetAttribute", 4000, false, cuPointerGetAttribute),
    FAKECUDA_ENTRY("cuMemCreate", 10020, false, cuMemCreate),
    FAKECUDA_ENTRY("cuMemRelease", 10020, false, cuMemRelease),
    FAKECUDA_ENTRY("cuMemMap", 10020, false, cuMemMap),
    FAKECUDA_ENTRY("cuMemUnmap", 10020, false, cuMemUnmap),
    FAKECUDA_ENTRY("cuMemAddressReserve", 10020, false, cuMemAddressReserve),
    FAKECUDA_ENTRY("cuMemAddressFree", 10020, false, cuMemAddressFree),
    FAKECUDA_ENTRY("cuMemSetAccess", 10020, false, cuMemSetAccess),
    FAKECUDA_ENTRY("cuMemGetAllocationGranularity", 10020, false, cuMemGetAllocationGranularity),
    // Host memory, arrays, imports, context teardown (driver_host.cc, driver_arrays.cc, driver_imports.cc,
    // driver_context.cc). From 13000 "cuCtxGetDevice" takes the context asked about.
    FAKECUDA_ENTRY("cuCtxGetDevice", 13000, false, cuCtxGetDevice_v2),
    FAKECUDA_ENTRY("cuMemAllocHost", 3020, false, cuMemAllocHost_v2),
    FAKECUDA_ENTRY("cuMemHostAlloc", 2020, false, cuMemHostAlloc),
    FAKECUDA_ENTRY("cuMemFreeHost", 2000, false, cuMemFreeHost),
    FAKECUDA_ENTRY("cuMemHostRegister", 6050, false, cuMemHostRegister_v2),
    FAKECUDA_ENTRY("cuMemHostUnregister", 4000, false, cuMemHostUnregister),
    FAKECUDA_ENTRY("cuArrayCreate", 3020, false, cuArrayCreate_v2),
    FAKECUDA_ENTRY("cuArray3DCreate", 3020, false, cuArray3DCreate_v2),
    FAKECUDA_ENTRY("cuArrayDestroy", 2000, false, cuArrayDestroy),
    FAKECUDA_ENTRY("cuMipmappedArrayCreate", 5000, false, cuMipmappedArrayCreate),
    FAKECUDA_ENTRY("cuMipmappedArrayDestroy", 5000, false, cuMipmappedArrayDestroy),
    FAKECUDA_ENTRY("cuArrayGetMemoryRequirements", 11060, false, cuArrayGetMemoryRequirements),
    FAKECUDA_ENTRY("cuMipmappedArrayGetMemoryRequirements", 11060, false, cuMipmappedArrayGetMemoryRequirements),
    FAKECUDA_ENTRY("cuMemGetAddressRange", 3020, false, cuMemGetAddressRange_v2),
    FAKECUDA_ENTRY("cuIpcOpenMemHandle", 11000, false, cuIpcOpenMemHandle_v2),
    FAKECUDA_ENTRY("cuIpcCloseMemHandle", 4010, false, cuIpcCloseMemHandle),
    FAKECUDA_ENTRY("cuDevicePrimaryCtxReset", 7000, false, cuDevicePrimaryCtxReset),
    FAKECUDA_ENTRY("cuDevicePrimaryCtxReset", 11000, false, cuDevicePrimaryCtxReset_v2),
    FAKECUDA_ENTRY("cuDevicePrimaryCtxRelease", 11000, false, cuDevicePrimaryCtxRelease_v2),
    FAKECUDA_ENTRY("cuStreamCreate", 2000, false, cuStreamCreate),
    FAKECUDA_ENTRY("cuStreamDestroy", 4000, false, cuStreamDestroy_v2),
    // Graphs (driver_graphs.cc). From 12000 "cuGraphInstantiate" has cuGraphInstantiateWithFlags' ABI.
    FAKECUDA_ENTRY("cuStreamBeginCapture", 10010, false, cuStreamBeginCapture_v2),
    FAKECUDA_ENTRY("cuStreamBeginCapture", 10010, true, cuStreamBeginCapture_v2_ptsz),
    FAKECUDA_ENTRY("cuStreamGetCaptureInfo", 12030, false, cuStreamGetCaptureInfo_v3),
    FAKECUDA_ENTRY("cuStreamGetCaptureInfo", 12030, true, cuStreamGetCaptureInfo_v3_ptsz),
    FAKECUDA_ENTRY("cuStreamEndCapture", 10000, false, cuStreamEndCapture),
    FAKECUDA_ENTRY("cuStreamEndCapture", 10000, true, cuStreamEndCapture_ptsz),
    FAKECUDA_ENTRY("cuGraphCreate", 10000, false, cuGraphCreate),
    FAKECUDA_ENTRY("cuGraphAddMemAllocNode", 11040, false, cuGraphAddMemAllocNode),
    FAKECUDA_ENTRY("cuGraphAddMemFreeNode", 11040, false, cuGraphAddMemFreeNode),
    FAKECUDA_ENTRY("cuGraphInstantiate", 12000, false, cuGraphInstantiateWithFlags),
    FAKECUDA_ENTRY("cuGraphInstantiateWithFlags", 11040, false, cuGraphInstantiateWithFlags),
    FAKECUDA_ENTRY("cuGraphInstantiateWithParams", 12000, false, cuGraphInstantiateWithParams),
    FAKECUDA_ENTRY("cuGraphInstantiateWithParams", 12000, true, cuGraphInstantiateWithParams_ptsz),
    FAKECUDA_ENTRY("cuGraphLaunch", 10000, false, cuGraphLaunch),
    FAKECUDA_ENTRY("cuGraphLaunch", 10000, true, cuGraphLaunch_ptsz),
    // Pools, synchronizations, events, graph memory, PCI bus ids (driver_pools.cc).
    FAKECUDA_ENTRY("cuDeviceGetMemPool", 11020, false, cuDeviceGetMemPool),
    FAKECUDA_ENTRY("cuDeviceSetMemPool", 11020, false, cuDeviceSetMemPool),
    FAKECUDA_ENTRY("cuMemPoolCreate", 11020, false, cuMemPoolCreate),
    FAKECUDA_ENTRY("cuMemPoolDestroy", 11020, false, cuMemPoolDestroy),
    FAKECUDA_ENTRY("cuMemPoolTrimTo", 11020, false, cuMemPoolTrimTo),
    FAKECUDA_ENTRY("cuMemPoolSetAttribute", 11020, false, cuMemPoolSetAttribute),
    FAKECUDA_ENTRY("cuMemPoolGetAttribute", 11020, false, cuMemPoolGetAttribute),
    FAKECUDA_ENTRY("cuStreamSynchronize", 2000, false, cuStreamSynchronize),
    FAKECUDA_ENTRY("cuStreamSynchronize", 7000, true, cuStreamSynchronize_ptsz),
    FAKECUDA_ENTRY("cuCtxSynchronize", 2000, false, cuCtxSynchronize),
    FAKECUDA_ENTRY("cuCtxSynchronize", 13000, false, cuCtxSynchronize_v2),
    FAKECUDA_ENTRY("cuEventSynchronize", 2000, false, cuEventSynchronize),
    FAKECUDA_ENTRY("cuEventCreate", 2000, false, cuEventCreate),
    FAKECUDA_ENTRY("cuEventDestroy", 4000, false, cuEventDestroy_v2),
    FAKECUDA_ENTRY("cuDeviceGetGraphMemAttribute", 11040, false, cuDeviceGetGraphMemAttribute),
    FAKECUDA_ENTRY("cuDeviceGraphMemTrim", 11040, false, cuDeviceGraphMemTrim),
    FAKECUDA_ENTRY("cuDeviceGetPCIBusId", 2000, false, cuDeviceGetPCIBusId),
    // Device identity (driver_pools.cc).
    FAKECUDA_ENTRY("cuDeviceGetUuid", 9020, false, cuDeviceGetUuid),
    FAKECUDA_ENTRY("cuDeviceGetUuid", 11040, false, cuDeviceGetUuid_v2),
    FAKECUDA_ENTRY("cuDeviceGetName", 2000, false, cuDeviceGetName),
    FAKECUDA_ENTRY("cuDeviceTotalMem", 3020, false, cuDeviceTotalMem_v2),
};
#undef FAKECUDA_ENTRY

std::atomic<unsigned long> g_lookups{0};

// Best entry for (symbol, version, per-thread flag): the highest min_version not above `version`;
// among equals the one whose stream flavour matches. A name without a per-thread variant is returned
// for per-thread requests too (it takes no stream).
CUresult resolve(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status) {
  g_lookups.fetch_add(1);
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const Entry* best = nullptr;
  bool name_known = false;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.base_name, symbol) != 0) continue;
    name_known = true;
    if (e.min_version > cuda_version || (e.per_thread_stream && !per_thread)) continue;
    if (!best || e.min_version > best->min_version ||
        (e.min_version == best->min_version && e.per_thread_stream == per_thread))
      best = &e;
  }
  *pfn = best ? best->function : nullptr;
  if (status) {
    *status = best         ? CU_GET_PROC_ADDRESS_SUCCESS
              : name_known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                           : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  return resolve(symbol, pfn, cuda_version, flags, nullptr);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  return resolve(symbol, pfn, cuda_version, flags, status);
}

// Test-only: how many times either resolver ABI was called in this process (through any pointer).
unsigned long fakecuda_proc_address_lookups() { return g_lookups.load(); }

}  // extern "C"
