// The driver API's memory that is not plain device memory, once each, in a fixed order: page-locked and
// registered host memory, arrays, VMM handles on the host and on a device, imports (IPC, external memory,
// a shareable handle), stream-ordered allocations during capture (a stream of the program's own and the
// per-thread stream), a graph with memory nodes, and context teardown (cuCtxDestroy of a context made while
// the primary context of the same device holds memory, cuDevicePrimaryCtxReset, and a
// cuDevicePrimaryCtxRelease that must not be recorded). check_memory_kinds_driver.py compares the
// exact event sequence; handles are printed as "value NAME 0xHEX".
#include <cuda.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "e2e_util.h"

extern "C" {
decltype(cuStreamBeginCapture_v2) cuStreamBeginCapture_v2_ptsz;
decltype(cuStreamEndCapture) cuStreamEndCapture_ptsz;
decltype(cuMemAllocAsync) cuMemAllocAsync_ptsz;
decltype(cuMemFreeAsync) cuMemFreeAsync_ptsz;
decltype(cuGraphLaunch) cuGraphLaunch_ptsz;
}

namespace {

void print_value(const char* name, uint64_t value) {
  std::printf("value %s 0x%llx\n", name, static_cast<unsigned long long>(value));
}
void print_value(const char* name, const void* value) { print_value(name, reinterpret_cast<uintptr_t>(value)); }

CUipcMemHandle other_process_handle(uint64_t size, int32_t device) {
  CUipcMemHandle handle{};
  std::memcpy(handle.reserved, &size, sizeof size);
  std::memcpy(handle.reserved + 8, &device, sizeof device);
  return handle;
}

CUmemAllocationProp vmm_prop(CUmemLocationType type, int id) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = type;
  prop.location.id = id;
  return prop;
}

}  // namespace

int main() {
  CUcontext primary0;
  E2E_OK(cuInit(0));
  E2E_OK(cuDevicePrimaryCtxRetain(&primary0, 0));
  E2E_OK(cuCtxSetCurrent(primary0));
  print_value("primary0", primary0);

  void *pinned, *host_alloc;
  E2E_OK(cuMemAllocHost(&pinned, 1 * kMiB));
  E2E_OK(cuMemHostAlloc(&host_alloc, 2 * kMiB, 0));
  void* registered = std::aligned_alloc(4096, 64 << 10);
  E2E_OK(cuMemHostRegister(registered, 64 << 10, 0));
  print_value("pinned", pinned);
  print_value("host_alloc", host_alloc);
  print_value("registered", registered);

  CUarray array_2d, array_3d;
  CUmipmappedArray mipmapped;
  CUDA_ARRAY_DESCRIPTOR desc_2d{};
  desc_2d.Width = 1000;
  desc_2d.Format = CU_AD_FORMAT_FLOAT;
  desc_2d.NumChannels = 1;
  E2E_OK(cuArrayCreate(&array_2d, &desc_2d));
  CUDA_ARRAY3D_DESCRIPTOR desc_3d{};
  desc_3d.Width = desc_3d.Height = desc_3d.Depth = 64;
  desc_3d.Format = CU_AD_FORMAT_UNSIGNED_INT16;
  desc_3d.NumChannels = 2;
  E2E_OK(cuArray3DCreate(&array_3d, &desc_3d));
  CUDA_ARRAY3D_DESCRIPTOR desc_mip{};
  desc_mip.Width = desc_mip.Height = 128;
  desc_mip.Format = CU_AD_FORMAT_SIGNED_INT8;
  desc_mip.NumChannels = 4;
  E2E_OK(cuMipmappedArrayCreate(&mipmapped, &desc_mip, 2));
  CUarray deferred;  // the one kind of array the driver says the size of
  CUDA_ARRAY3D_DESCRIPTOR desc_deferred{};
  desc_deferred.Width = desc_deferred.Height = 100;
  desc_deferred.Format = CU_AD_FORMAT_FLOAT;
  desc_deferred.NumChannels = 1;
  desc_deferred.Flags = CUDA_ARRAY3D_DEFERRED_MAPPING;
  E2E_OK(cuArray3DCreate(&deferred, &desc_deferred));
  print_value("deferred", deferred);
  print_value("array_2d", array_2d);
  print_value("array_3d", array_3d);
  print_value("mipmapped", mipmapped);

  CUmemGenericAllocationHandle host_handle, device_handle;
  CUmemAllocationProp host_prop = vmm_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
  CUmemAllocationProp device_prop = vmm_prop(CU_MEM_LOCATION_TYPE_DEVICE, 1);
  E2E_OK(cuMemCreate(&host_handle, 2 * kMiB, &host_prop, 0));
  E2E_OK(cuMemCreate(&device_handle, 4 * kMiB, &device_prop, 0));
  print_value("host_handle", host_handle);
  print_value("device_handle", device_handle);

  CUdeviceptr ipc, mapped_buffer;
  E2E_OK(cuIpcOpenMemHandle(&ipc, other_process_handle(1 * kMiB, 0), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  CUexternalMemory external;
  CUDA_EXTERNAL_MEMORY_HANDLE_DESC external_desc{};
  external_desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
  external_desc.size = 6 * kMiB;
  E2E_OK(cuImportExternalMemory(&external, &external_desc));
  CUDA_EXTERNAL_MEMORY_BUFFER_DESC buffer_desc{};
  buffer_desc.size = 3 * kMiB;
  E2E_OK(cuExternalMemoryGetMappedBuffer(&mapped_buffer, external, &buffer_desc));
  CUmemGenericAllocationHandle shared_handle;
  // The double reads the "file descriptor" as the size of the other process's allocation.
  E2E_OK(cuMemImportFromShareableHandle(&shared_handle, reinterpret_cast<void*>(uintptr_t{4 * kMiB}),
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  print_value("ipc", ipc);
  print_value("mapped_buffer", mapped_buffer);
  print_value("shared_handle", shared_handle);

  CUstream stream = reinterpret_cast<CUstream>(0x6100);
  CUdeviceptr captured, per_thread;
  CUgraph captured_graph, per_thread_graph;
  CUgraphExec captured_exec;
  E2E_OK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  E2E_OK(cuMemAllocAsync(&captured, 1 * kMiB, stream));
  E2E_OK(cuMemFreeAsync(captured, stream));
  E2E_OK(cuStreamEndCapture(stream, &captured_graph));
  E2E_OK(cuGraphInstantiate(&captured_exec, captured_graph, 0));
  E2E_OK(cuGraphLaunch(captured_exec, stream));
  E2E_OK(cuStreamBeginCapture_v2_ptsz(nullptr, CU_STREAM_CAPTURE_MODE_RELAXED));
  E2E_OK(cuMemAllocAsync_ptsz(&per_thread, 256 << 10, nullptr));
  E2E_OK(cuStreamEndCapture_ptsz(nullptr, &per_thread_graph));
  print_value("captured", captured);
  print_value("captured_graph", captured_graph);
  print_value("captured_exec", captured_exec);
  print_value("per_thread", per_thread);
  print_value("per_thread_graph", per_thread_graph);

  CUgraph built;
  CUgraphExec built_exec;
  CUgraphNode alloc_node, free_node;
  E2E_OK(cuGraphCreate(&built, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = 0;
  params.bytesize = 2 * kMiB;
  E2E_OK(cuGraphAddMemAllocNode(&alloc_node, built, nullptr, 0, &params));
  E2E_OK(cuGraphAddMemFreeNode(&free_node, built, &alloc_node, 1, params.dptr));
  CUDA_GRAPH_INSTANTIATE_PARAMS instantiate_params{};
  E2E_OK(cuGraphInstantiateWithParams(&built_exec, built, &instantiate_params));
  E2E_OK(cuGraphLaunch_ptsz(built_exec, nullptr));
  print_value("built", built);
  print_value("node_memory", params.dptr);
  print_value("built_exec", built_exec);

  E2E_OK(cuMemFreeHost(pinned));
  E2E_OK(cuMemFreeHost(host_alloc));
  E2E_OK(cuMemHostUnregister(registered));
  E2E_OK(cuArrayDestroy(array_2d));
  E2E_OK(cuArrayDestroy(array_3d));
  E2E_OK(cuMipmappedArrayDestroy(mipmapped));
  E2E_OK(cuArrayDestroy(deferred));
  E2E_OK(cuMemRelease(host_handle));
  E2E_OK(cuMemRelease(device_handle));
  E2E_OK(cuIpcCloseMemHandle(ipc));
  E2E_OK(cuMemFree(mapped_buffer));
  E2E_OK(cuMemRelease(shared_handle));

  // Device 0's primary context holds `in_primary` while a context of its own on the same device is made and
  // destroyed with `in_own` in it (the driver frees in_own only); then the primary context is reset, which
  // frees in_primary. Releasing device 1's primary context (never retained here) records nothing.
  CUcontext own;
  CUdeviceptr in_own, in_primary;
  E2E_OK(cuMemAlloc(&in_primary, 5 * kMiB));
  E2E_OK(cuCtxCreate(&own, nullptr, 0, 0));
  E2E_OK(cuMemAlloc(&in_own, 3 * kMiB));
  E2E_OK(cuCtxDestroy(own));
  E2E_OK(cuCtxSetCurrent(primary0));
  E2E_OK(cuDevicePrimaryCtxReset(0));
  E2E_OK(cuDevicePrimaryCtxRelease(1));
  print_value("own", own);
  print_value("in_own", in_own);
  print_value("in_primary", in_primary);
  std::free(registered);
  return 0;
}
