// A fake NVML (libnvidia-ml.so.1) over the fake driver's devices: the functions a profiler uses to see a
// device's memory as nvidia-smi does. Test-only.
//
// Devices are found by PCI bus id only, in the fake driver's format ("0000:BB:00.0", BB = 0xc0 - 2 * CUDA
// ordinal, see cuDeviceGetPCIBusId in driver_pools.cc). Per device:
//   this process      = what the fake driver has charged to the device + FAKENVML_CONTEXT_BYTES (default 0:
//                       the memory a real context and the CUDA libraries take without any API reporting it)
//   another process   = FAKENVML_OTHER_PROCESS_BYTES, a comma-separated list by CUDA ordinal (default none);
//                       listed as pid 1 when not 0
//   total             = the fake driver's capacity (FAKECUDA_TOTAL_BYTES); free = total - both
//   more processes    = FAKENVML_OTHER_PROCESSES, per CUDA ordinal a comma-separated list of pid=bytes (bytes `na`:
//                       NVML_VALUE_NOT_AVAILABLE), the ordinals' lists separated by ';' (default none): e.g.
//                       "4242=1048576,77=na;;9=4096" lists pids 4242 and 77 on device 0 and 9 on device 2, after
//                       the processes above (a pid may be listed twice, as NVML lists a process per MIG instance);
//                       their bytes count as used; at most kMaxMoreProcesses per device
// FAKENVML_LIST_OTHERS_FIRST=1 lists the other process before this one; FAKENVML_PROCESSES_NOT_AVAILABLE=1
// reports this process's usedGpuMemory as NVML_VALUE_NOT_AVAILABLE (as NVML does under WDDM);
// FAKENVML_OWN_PID=N lists this process under pid N (as NVML lists host pids to a process in a container).
// fakenvml_memory_info_calls() counts the answers of nvmlDeviceGetMemoryInfo.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
// From the fake driver (libcuda.so.1), test-only.
uint64_t fakecuda_device_used_bytes(int device);
uint64_t fakecuda_device_total_bytes();
int fakecuda_device_count();
}

namespace {

// nvml.h
using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t, what the _v3 process queries fill in
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct FakeDevice {
  int ordinal;
};
constexpr int kMaxDevices = 64;
FakeDevice g_devices[kMaxDevices];
bool g_initialized = false;
std::atomic<unsigned> g_memory_info_calls{0};

uint64_t env_u64(const char* name) {
  const char* text = std::getenv(name);
  return text ? std::strtoull(text, nullptr, 0) : 0;
}

// The ordinal-th entry of a comma-separated list of byte counts; 0 when absent.
uint64_t other_process_bytes(int ordinal) {
  const char* text = std::getenv("FAKENVML_OTHER_PROCESS_BYTES");
  for (int i = 0; text && *text; i++) {
    char* end = nullptr;
    unsigned long long value = std::strtoull(text, &end, 0);
    if (i == ordinal) return value;
    text = *end == ',' ? end + 1 : nullptr;
  }
  return 0;
}

// The FAKENVML_OTHER_PROCESSES entries of `ordinal` into `out` (at most `max`); returns how many.
constexpr unsigned kMaxMoreProcesses = 16;
unsigned more_processes(int ordinal, nvmlProcessInfo_t* out, unsigned max) {
  const char* text = std::getenv("FAKENVML_OTHER_PROCESSES");
  for (int i = 0; text && i < ordinal; i++) {
    text = std::strchr(text, ';');
    if (text) text++;
  }
  unsigned n = 0;
  while (text && *text && *text != ';' && n < max) {
    char* end = nullptr;
    unsigned pid = static_cast<unsigned>(std::strtoul(text, &end, 0));
    if (*end != '=') break;
    text = end + 1;
    unsigned long long bytes = NVML_VALUE_NOT_AVAILABLE;
    if (std::strncmp(text, "na", 2) == 0) {
      end = const_cast<char*>(text) + 2;
    } else {
      bytes = std::strtoull(text, &end, 0);
    }
    out[n++] = nvmlProcessInfo_t{pid, bytes, 0, 0};
    text = *end == ',' ? end + 1 : nullptr;
  }
  return n;
}

// What the FAKENVML_OTHER_PROCESSES entries of `ordinal` hold (NVML_VALUE_NOT_AVAILABLE counts 0).
uint64_t more_processes_bytes(int ordinal) {
  nvmlProcessInfo_t more[kMaxMoreProcesses];
  uint64_t bytes = 0;
  for (unsigned i = 0, n = more_processes(ordinal, more, kMaxMoreProcesses); i < n; i++)
    if (more[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) bytes += more[i].usedGpuMemory;
  return bytes;
}

uint64_t own_bytes(int ordinal) { return fakecuda_device_used_bytes(ordinal) + env_u64("FAKENVML_CONTEXT_BYTES"); }

const FakeDevice* device_of(void* handle) {
  auto* device = static_cast<const FakeDevice*>(handle);
  return device >= g_devices && device < g_devices + kMaxDevices ? device : nullptr;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  g_initialized = true;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (!bus_id || !device) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) return NVML_ERROR_INVALID_ARGUMENT;
  int ordinal = (0xc0 - static_cast<int>(bus)) / 2;
  if (domain != 0 || slot != 0 || function != 0 || (0xc0 - static_cast<int>(bus)) % 2 != 0 || ordinal < 0 ||
      ordinal >= fakecuda_device_count() || ordinal >= kMaxDevices)
    return NVML_ERROR_NOT_FOUND;
  g_devices[ordinal].ordinal = ordinal;
  *device = &g_devices[ordinal];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(void* handle, nvmlMemory_t* memory) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  const FakeDevice* device = device_of(handle);
  if (!device || !memory) return NVML_ERROR_INVALID_ARGUMENT;
  g_memory_info_calls.fetch_add(1);
  memory->total = fakecuda_device_total_bytes();
  memory->used =
      own_bytes(device->ordinal) + other_process_bytes(device->ordinal) + more_processes_bytes(device->ordinal);
  memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void* handle, unsigned int* count, nvmlProcessInfo_t* infos) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  const FakeDevice* device = device_of(handle);
  if (!device || !count) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlProcessInfo_t listed[2 + kMaxMoreProcesses];
  unsigned n = 0;
  unsigned long long own =
      env_u64("FAKENVML_PROCESSES_NOT_AVAILABLE") == 1 ? NVML_VALUE_NOT_AVAILABLE : own_bytes(device->ordinal);
  unsigned own_pid = env_u64("FAKENVML_OWN_PID") ? static_cast<unsigned>(env_u64("FAKENVML_OWN_PID"))
                                                 : static_cast<unsigned>(getpid());
  nvmlProcessInfo_t self{own_pid, own, 0, 0};
  uint64_t other_bytes = other_process_bytes(device->ordinal);
  nvmlProcessInfo_t other{1, other_bytes, 0, 0};
  bool others_first = env_u64("FAKENVML_LIST_OTHERS_FIRST") == 1;
  if (other_bytes && others_first) listed[n++] = other;
  listed[n++] = self;
  if (other_bytes && !others_first) listed[n++] = other;
  n += more_processes(device->ordinal, listed + n, kMaxMoreProcesses);
  if (!infos || *count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::memcpy(infos, listed, n * sizeof(nvmlProcessInfo_t));
  *count = n;
  return NVML_SUCCESS;
}

// Test-only: how many times nvmlDeviceGetMemoryInfo answered (a program waits for the tracer's first sample).
unsigned fakenvml_memory_info_calls() { return g_memory_info_calls.load(); }

}  // extern "C"
