// Every memory kind of the runtime API that is not plain device memory, once each, in a fixed order:
// page-locked and registered host memory, arrays, a pitched 3D allocation, managed memory, an IPC import,
// stream-ordered allocations made during stream capture (legacy and per-thread streams), a graph built
// with memory nodes, and a device reset. Built twice: against the shared runtime (the runtime hooks see the
// calls) and the static one (only the driver calls it makes are seen). check_memory_kinds.py compares the
// exact event sequence; the handles it cannot know are printed as "value NAME 0xHEX", among them the
// context the runtime made current (device 0's primary context), which the allocations the driver frees
// with it name, and so does the reset.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "e2e_util.h"

extern "C" {
decltype(cudaMallocAsync) cudaMallocAsync_ptsz;
decltype(cudaFreeAsync) cudaFreeAsync_ptsz;
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph);
}

namespace {

void print_value(const char* name, const void* value) {
  std::printf("value %s 0x%llx\n", name, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(value)));
}

// The calling thread's current context, asked of the driver the runtime loaded (the program is not linked
// with it; the runtime API has no call that names a context).
CUcontext current_context() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void* symbol = libcuda ? dlsym(libcuda, "cuCtxGetCurrent") : nullptr;
  auto get_current = reinterpret_cast<decltype(&cuCtxGetCurrent)>(symbol);
  if (!get_current) {
    std::fprintf(stderr, "cuCtxGetCurrent not found in the loaded libcuda.so.1\n");
    std::exit(3);
  }
  CUcontext context = nullptr;
  E2E_OK(get_current(&context));
  return context;
}

// The test double's IPC handle: another process's allocation of `size` bytes on `device`.
cudaIpcMemHandle_t other_process_handle(uint64_t size, int32_t device) {
  cudaIpcMemHandle_t handle{};
  std::memcpy(handle.reserved, &size, sizeof size);
  std::memcpy(handle.reserved + 8, &device, sizeof device);
  return handle;
}

}  // namespace

int main() {
  // A stream handle of the program's own; the double tracks capture per handle value.
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x5100);
  E2E_OK(cudaSetDevice(0));
  print_value("primary0", current_context());

  void *pinned, *host_alloc;
  E2E_OK(cudaMallocHost(&pinned, 1 * kMiB));
  E2E_OK(cudaHostAlloc(&host_alloc, 2 * kMiB, cudaHostAllocDefault));
  void* registered = std::aligned_alloc(4096, 64 << 10);
  E2E_OK(cudaHostRegister(registered, 64 << 10, cudaHostRegisterDefault));
  print_value("pinned", pinned);
  print_value("host_alloc", host_alloc);
  print_value("registered", registered);

  cudaArray_t array_2d, array_3d;
  cudaMipmappedArray_t mipmapped;
  cudaChannelFormatDesc float4_desc{32, 32, 32, 32, cudaChannelFormatKindFloat};
  cudaChannelFormatDesc uchar_desc{8, 0, 0, 0, cudaChannelFormatKindUnsigned};
  cudaChannelFormatDesc float_desc{32, 0, 0, 0, cudaChannelFormatKindFloat};
  E2E_OK(cudaMallocArray(&array_2d, &float4_desc, 100, 10, 0));
  E2E_OK(cudaMalloc3DArray(&array_3d, &uchar_desc, cudaExtent{300, 200, 5}, 0));
  E2E_OK(cudaMallocMipmappedArray(&mipmapped, &float_desc, cudaExtent{256, 256, 0}, 3, 0));
  print_value("array_2d", array_2d);
  print_value("array_3d", array_3d);
  print_value("mipmapped", mipmapped);

  cudaPitchedPtr pitched;
  E2E_OK(cudaMalloc3D(&pitched, cudaExtent{1000, 20, 3}));
  void* managed;
  E2E_OK(cudaMallocManaged(&managed, 3 * kMiB, cudaMemAttachGlobal));
  void* imported;
  E2E_OK(cudaIpcOpenMemHandle(&imported, other_process_handle(4 * kMiB, 1), cudaIpcMemLazyEnablePeerAccess));
  print_value("pitched", pitched.ptr);
  print_value("managed", managed);
  print_value("imported", imported);

  // Capture on `stream`: a block allocated before the capture and one allocated inside are freed inside.
  void *before_capture, *captured;
  E2E_OK(cudaMallocAsync(&before_capture, 1 * kMiB, stream));
  E2E_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  E2E_OK(cudaMallocAsync(&captured, 512 << 10, stream));
  E2E_OK(cudaFreeAsync(before_capture, stream));
  E2E_OK(cudaFreeAsync(captured, stream));
  cudaGraph_t captured_graph;
  E2E_OK(cudaStreamEndCapture(stream, &captured_graph));
  cudaGraphExec_t captured_exec;
  E2E_OK(cudaGraphInstantiate(&captured_exec, captured_graph, 0));
  E2E_OK(cudaGraphLaunch(captured_exec, stream));
  print_value("before_capture", before_capture);
  print_value("captured", captured);
  print_value("captured_graph", captured_graph);
  print_value("captured_exec", captured_exec);

  // Capture on the per-thread default stream: stream 0 of the _ptsz entry points. The legacy stream 0 is
  // another stream and is not capturing.
  void *per_thread, *legacy;
  E2E_OK(cudaStreamBeginCapture_ptsz(nullptr, cudaStreamCaptureModeRelaxed));
  E2E_OK(cudaMallocAsync_ptsz(&per_thread, 256 << 10, nullptr));
  E2E_OK(cudaMallocAsync(&legacy, 128 << 10, nullptr));
  cudaGraph_t per_thread_graph;
  E2E_OK(cudaStreamEndCapture_ptsz(nullptr, &per_thread_graph));
  E2E_OK(cudaFreeAsync(legacy, nullptr));
  print_value("per_thread", per_thread);
  print_value("legacy", legacy);
  print_value("per_thread_graph", per_thread_graph);

  // A graph built with memory nodes: 8 MiB on device 1, allocated and freed by the graph.
  cudaGraph_t built;
  E2E_OK(cudaGraphCreate(&built, 0));
  cudaMemAllocNodeParams params{};
  params.poolProps.allocType = cudaMemAllocationTypePinned;
  params.poolProps.location.type = cudaMemLocationTypeDevice;
  params.poolProps.location.id = 1;
  params.bytesize = 8 * kMiB;
  cudaGraphNode_t alloc_node, free_node;
  E2E_OK(cudaGraphAddMemAllocNode(&alloc_node, built, nullptr, 0, &params));
  E2E_OK(cudaGraphAddMemFreeNode(&free_node, built, &alloc_node, 1, params.dptr));
  cudaGraphExec_t built_exec;
  E2E_OK(cudaGraphInstantiateWithFlags(&built_exec, built, 0));
  E2E_OK(cudaGraphLaunch(built_exec, stream));
  print_value("built", built);
  print_value("node_memory", params.dptr);
  print_value("built_exec", built_exec);

  E2E_OK(cudaFreeHost(pinned));
  E2E_OK(cudaFreeHost(host_alloc));
  E2E_OK(cudaHostUnregister(registered));
  E2E_OK(cudaFreeArray(array_2d));
  E2E_OK(cudaFreeArray(array_3d));
  E2E_OK(cudaFreeMipmappedArray(mipmapped));
  E2E_OK(cudaFree(pitched.ptr));
  E2E_OK(cudaFree(managed));
  E2E_OK(cudaIpcCloseMemHandle(imported));

  // Left to the reset: the driver frees it with device 0's primary context.
  void* left_to_reset;
  E2E_OK(cudaMalloc(&left_to_reset, 5 * kMiB));
  print_value("left_to_reset", left_to_reset);
  E2E_OK(cudaDeviceReset());
  std::free(registered);
  return 0;
}
