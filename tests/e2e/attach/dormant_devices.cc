// What a dormant process's allocations were made on, resolved at attach (check_dormant_devices.py). Usage:
// e2e_dormant_devices; then "exit" on stdin.
// Its first CUDA call (the dormant start) cudaMallocs 1 MiB on device 0. Dormant from then on: cudaSetDevice(1)
// and cudaMalloc 2 MiB (device 1, its primary context), cudaMallocAsync 256 KiB (a block of device 1's pool); on
// device 1 a context of its own, cuMemAlloc 3 MiB in it
// and cuMemAllocPitch 1000 x 100 (pitch 1024, so 102,400 bytes); a second context of its own on device 0,
// cuMemAlloc 5 MiB in it, and that context destroyed (the allocation goes with it). It prints one line per live
// allocation, "live API DEVICE ADDRESS SIZE", then "ready", and waits for "exit".
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

namespace {

void print_live(const char* api, int device, uint64_t address, size_t size) {
  std::printf("live %s %d %llu %zu\n", api, device, static_cast<unsigned long long>(address), size);
}

}  // namespace

int main() {
  void* first = nullptr;
  void* on_one = nullptr;
  void* block = nullptr;
  if (cudaMalloc(&first, 1 << 20) != cudaSuccess) return 3;
  if (cudaSetDevice(1) != cudaSuccess || cudaMalloc(&on_one, 2 << 20) != cudaSuccess ||
      cudaMallocAsync(&block, 256 << 10, nullptr) != cudaSuccess)
    return 3;
  CUcontext own = nullptr, gone = nullptr;
  CUdeviceptr in_own = 0, pitched = 0, in_gone = 0;
  size_t pitch = 0;
  if (cuCtxCreate_v4(&own, nullptr, 0, 1) != CUDA_SUCCESS || cuMemAlloc_v2(&in_own, 3 << 20) != CUDA_SUCCESS ||
      cuMemAllocPitch_v2(&pitched, &pitch, 1000, 100, 4) != CUDA_SUCCESS || pitch != 1024)
    return 4;
  if (cuCtxCreate_v4(&gone, nullptr, 0, 0) != CUDA_SUCCESS || cuMemAlloc_v2(&in_gone, 5 << 20) != CUDA_SUCCESS ||
      cuCtxDestroy_v2(gone) != CUDA_SUCCESS)
    return 5;
  print_live("cudaMalloc", 0, reinterpret_cast<uintptr_t>(first), 1 << 20);
  print_live("cudaMalloc", 1, reinterpret_cast<uintptr_t>(on_one), 2 << 20);
  print_live("cudaMallocAsync", 1, reinterpret_cast<uintptr_t>(block), 256 << 10);
  print_live("cuMemAlloc", 1, in_own, 3 << 20);
  print_live("cuMemAllocPitch", 1, pitched, 1024 * 100);
  std::printf("ready\n");
  std::fflush(stdout);
  std::string command;
  while (std::getline(std::cin, command))
    if (command == "exit") return 0;
  return 1;
}
