#include "samplers/device_usage.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "hooks/resolver.h"
#include "record/config.h"
#include "record/recorder.h"
#include "samplers/nvml_processes.h"
#include "samplers/pool_sampler.h"

namespace memtrace {

namespace {

// nvml.h, as published with the driver (the NVML headers are not needed to build memtrace).
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
using NvmlDevice = void*;
struct NvmlMemory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using InitFn = NvmlReturn (*)();
using HandleByPciBusIdFn = NvmlReturn (*)(const char*, NvmlDevice*);
using MemoryInfoFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using ComputeProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfo*);

struct Nvml {
  HandleByPciBusIdFn handle_by_pci_bus_id;
  MemoryInfoFn memory_info;
  ComputeProcessesFn compute_processes;
};
Nvml g_nvml;  // written once before g_nvml_loaded is set
std::atomic<bool> g_nvml_loaded{false};

// Devices by CUDA ordinal. A device's bit in g_noted is set by the first thread to see it, which then
// reads its PCI bus id and marks the slot ready; NVML's handle for it is looked up on first use.
constexpr int kMaxDevices = 64;
constexpr int kBusIdBytes = 32;  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
struct DeviceSlot {
  std::atomic<bool> bus_id_ready{false};
  char bus_id[kBusIdBytes] = {};
  std::atomic<int> handle_state{0};  // 0 not looked up, 1 found, 2 NVML does not know the bus id
  std::atomic<NvmlDevice> handle{nullptr};
};
// constinit: set before any code runs. A hook can run inside another library's constructor, before ours; a
// table initialized by a constructor of ours would then be wiped after that hook had noted a device in it.
constinit DeviceSlot g_devices[kMaxDevices];
// A device's bit is set once nothing is left to do for it on the hook path: all of them until the trace starts,
// and each device's from the first time it is seen after that (its Device record written, its PCI bus id read
// when NVML is loaded). Why one word for both conditions: every recorded event checks it, usually with the tracer's
// data evicted by the job's own work since the last event, and one word on a line of its own is one miss where two were
// two. device_usage_sample_all reads it only once NVML is loaded, when a set bit means the device was seen.
alignas(64) std::atomic<uint64_t> g_noted{~uint64_t{0}};

bool nvml_wanted() { return config_bool("MEMTRACE_NVML", true, true); }

template <typename Fn>
Fn nvml_symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(real_dlsym(library, name));
}

NvmlDevice nvml_device(int device) {
  DeviceSlot& slot = g_devices[device];
  int state = slot.handle_state.load(std::memory_order_acquire);
  if (state == 0) {
    NvmlDevice handle = nullptr;
    bool found = g_nvml.handle_by_pci_bus_id(slot.bus_id, &handle) == kNvmlSuccess && handle;
    if (found) slot.handle.store(handle, std::memory_order_relaxed);
    // Two threads may look it up at once; both find the same answer.
    slot.handle_state.store(found ? 1 : 2, std::memory_order_release);
    state = found ? 1 : 2;
  }
  return state == 1 ? slot.handle.load(std::memory_order_relaxed) : nullptr;
}

// The NVML device of a CUDA ordinal whose bus id is known; null otherwise.
NvmlDevice known_nvml_device(int device) {
  if (!g_nvml_loaded.load(std::memory_order_acquire) || device < 0 || device >= kMaxDevices) return nullptr;
  if (!g_devices[device].bus_id_ready.load(std::memory_order_acquire)) return nullptr;
  return nvml_device(device);
}

// NVML's figures of the processes on a device: this process's use, the others' sum, and the others one by one.
// At most kMaxNvmlProcesses are looked at; a longer list (NVML_ERROR_INSUFFICIENT_SIZE) leaves the per-process figures
// out of that sample rather than allocate.
struct ProcessFigures {
  ProcessUsage usage{false, 0, 0};
  NvmlOtherProcess others[kMaxNvmlProcesses];
  unsigned other_count = 0;
};

void read_process_figures(NvmlDevice handle, ProcessFigures* figures) {
  NvmlProcessInfo processes[kMaxNvmlProcesses];
  unsigned count = kMaxNvmlProcesses;
  if (g_nvml.compute_processes(handle, &count, processes) != kNvmlSuccess || count > kMaxNvmlProcesses) return;
  const unsigned pid = static_cast<unsigned>(getpid());
  figures->usage = split_process_usage(processes, count, pid);
  // Where our own entry is not found, every "other" may be us under another pid: no list either.
  if (figures->usage.known) figures->other_count = other_processes(processes, count, pid, figures->others);
}

// Sets `e`'s per-process figures from `figures`, when known.
void add_process_usage(const ProcessFigures& figures, MemoryEvent* e) {
  if (!figures.usage.known) return;
  e->has_process_usage = true;
  e->process_used_bytes = figures.usage.process_used_bytes;
  e->other_processes_used_bytes = figures.usage.other_processes_used_bytes;
}

bool sample_device(int device) {
  NvmlDevice handle = known_nvml_device(device);
  if (!handle) return false;
  NvmlMemory memory{};
  if (g_nvml.memory_info(handle, &memory) != kNvmlSuccess) return false;
  MemoryEvent e{.kind = EventKind::kDeviceUsage,
                .api = Api::kNvmlSample,
                .device = device,
                .device_free_bytes = memory.free,
                .device_total_bytes = memory.total};
  ProcessFigures figures;
  read_process_figures(handle, &figures);
  add_process_usage(figures, &e);
  record_device_usage(e, figures.usage.known, figures.others, figures.other_count);
  return true;
}

// The Device record of `device` (memtrace.proto), from the driver's own functions (driver_helper, never our
// hooks): nothing when it does not give the UUID, the record's reason to be.
void describe_device(int device) {
  auto uuid_fn = reinterpret_cast<CUresult (*)(CUuuid*, CUdevice)>(driver_helper(kDeviceGetUuid));
  CUuuid uuid;
  if (!uuid_fn || uuid_fn(&uuid, device) != CUDA_SUCCESS) return;
  uint8_t uuid_bytes[16];
  static_assert(sizeof uuid.bytes == sizeof uuid_bytes, "CUuuid is 16 bytes");
  memcpy(uuid_bytes, uuid.bytes, sizeof uuid_bytes);
  char name[256] = "";
  auto name_fn = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(driver_helper(kDeviceGetName));
  if (!name_fn || name_fn(name, sizeof name, device) != CUDA_SUCCESS) name[0] = '\0';
  name[sizeof name - 1] = '\0';
  size_t total_bytes = 0;
  auto total_fn = reinterpret_cast<CUresult (*)(size_t*, CUdevice)>(driver_helper(kDeviceTotalMem));
  if (!total_fn || total_fn(&total_bytes, device) != CUDA_SUCCESS) total_bytes = 0;
  record_device(device, uuid_bytes, name, total_bytes);
}

void load_nvml() {
  if (g_nvml_loaded.load() || !nvml_wanted()) return;
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) return;
  auto init = nvml_symbol<InitFn>(library, "nvmlInit_v2");
  g_nvml.handle_by_pci_bus_id = nvml_symbol<HandleByPciBusIdFn>(library, "nvmlDeviceGetHandleByPciBusId_v2");
  g_nvml.memory_info = nvml_symbol<MemoryInfoFn>(library, "nvmlDeviceGetMemoryInfo");
  g_nvml.compute_processes = nvml_symbol<ComputeProcessesFn>(library, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!init || !g_nvml.handle_by_pci_bus_id || !g_nvml.memory_info || !g_nvml.compute_processes ||
      init() != kNvmlSuccess) {
    dlclose(library);
    return;
  }
  g_nvml_loaded.store(true, std::memory_order_release);  // the library stays loaded for the process's life
}

}  // namespace

void device_usage_start() {
  load_nvml();
  // From now on, devices are noted as they are seen: anew in each trace (a forked child's too), whose Device
  // records are its own.
  g_noted.store(0, std::memory_order_release);
}

namespace {
// A device seen for the first time in this trace. Out of line: the check in device_usage_note_device is all an
// event pays, without the registers this path needs.
__attribute__((noinline)) void note_new_device(int device) {
  describe_device(device);
  if (!g_nvml_loaded.load(std::memory_order_acquire)) return;
  using Fn = CUresult (*)(char*, int, CUdevice);
  auto fn = reinterpret_cast<Fn>(driver_helper(kDeviceGetPCIBusId));
  DeviceSlot& slot = g_devices[device];
  if (fn && fn(slot.bus_id, kBusIdBytes, device) == CUDA_SUCCESS) {
    slot.bus_id[kBusIdBytes - 1] = '\0';
    slot.bus_id_ready.store(true, std::memory_order_release);
  }
}
}  // namespace

void device_usage_note_device(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  uint64_t bit = uint64_t{1} << device;
  if (g_noted.load(std::memory_order_relaxed) & bit) return;
  if (g_noted.fetch_or(bit) & bit) return;  // another thread is describing it
  note_new_device(device);
}

bool device_usage_baseline(int device, uint64_t* free_bytes, uint64_t* total_bytes, bool* has_process_used,
                           uint64_t* process_used_bytes) {
  if (!g_nvml_loaded.load(std::memory_order_acquire) || device < 0 || device >= kMaxDevices) return false;
  DeviceSlot& slot = g_devices[device];
  if (!slot.bus_id_ready.load(std::memory_order_acquire)) {
    // cuDeviceGetPCIBusId needs no context: the control thread, which has none, may ask.
    using Fn = CUresult (*)(char*, int, CUdevice);
    auto fn = reinterpret_cast<Fn>(driver_helper(kDeviceGetPCIBusId));
    char bus_id[kBusIdBytes] = {};
    if (!fn || fn(bus_id, kBusIdBytes, device) != CUDA_SUCCESS) return false;
    bus_id[kBusIdBytes - 1] = '\0';
    if (!slot.bus_id_ready.load(std::memory_order_acquire)) {
      memcpy(slot.bus_id, bus_id, sizeof bus_id);
      slot.bus_id_ready.store(true, std::memory_order_release);
    }
  }
  NvmlDevice handle = known_nvml_device(device);
  NvmlMemory memory{};
  if (!handle || g_nvml.memory_info(handle, &memory) != kNvmlSuccess) return false;
  *free_bytes = memory.free;
  *total_bytes = memory.total;
  ProcessFigures figures;
  read_process_figures(handle, &figures);
  *has_process_used = figures.usage.known;
  *process_used_bytes = figures.usage.process_used_bytes;
  return true;
}

int device_usage_sample_all() {
  if (!g_nvml_loaded.load(std::memory_order_acquire)) return 0;
  uint64_t noted = g_noted.load(std::memory_order_acquire);
  int recorded = 0;
  for (int device = 0; device < kMaxDevices; device++)
    if ((noted >> device & 1) && sample_device(device)) recorded++;
  return recorded;
}

void device_usage_after_oom(int device, Api api, bool have_memory_info, uint64_t free_bytes, uint64_t total_bytes) {
  MemoryEvent e{.kind = EventKind::kDeviceUsage, .api = api, .device = device};
  if (have_memory_info) {
    e.device_free_bytes = free_bytes;
    e.device_total_bytes = total_bytes;
  }
  device_usage_note_device(device);
  ProcessFigures figures;
  if (NvmlDevice handle = known_nvml_device(device)) {
    NvmlMemory memory{};
    if (!have_memory_info && g_nvml.memory_info(handle, &memory) == kNvmlSuccess) {
      have_memory_info = true;
      e.device_free_bytes = memory.free;
      e.device_total_bytes = memory.total;
    }
    read_process_figures(handle, &figures);
    add_process_usage(figures, &e);
  }
  if (have_memory_info) record_device_usage(e, figures.usage.known, figures.others, figures.other_count);
}

}  // namespace memtrace
