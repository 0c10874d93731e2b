#include "attach/cupti_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hooks/resolver.h"

namespace memtrace {
namespace {

constexpr const char* kNames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
// Below the directory of a loaded CUDA library: the same directory (the toolkit's lib64, a cu13 wheel's
// nvidia/cu13/lib), the cu12 wheels' nvidia/cuda_cupti/lib next to nvidia/cuda_runtime/lib, the toolkit's extras.
constexpr const char* kBesideCuda[] = {"", "/../../cuda_cupti/lib", "/../extras/CUPTI/lib64"};
constexpr const char* kUnderToolkit[] = {"/extras/CUPTI/lib64", "/lib64", "/lib"};
constexpr size_t kPathBytes = 4096;

// The directories of the loaded libcudart.so* / libcuda.so* (at most kMaxDirs).
constexpr int kMaxDirs = 4;
struct CudaDirs {
  char dir[kMaxDirs][kPathBytes];
  int count = 0;
};

int collect_cuda_dir(dl_phdr_info* info, size_t, void* data) {
  auto* dirs = static_cast<CudaDirs*>(data);
  const char* name = info->dlpi_name;
  const char* slash = name ? strrchr(name, '/') : nullptr;
  if (!slash || dirs->count == kMaxDirs) return 0;
  if (strncmp(slash, "/libcudart.so", 13) != 0 && strncmp(slash, "/libcuda.so", 11) != 0) return 0;
  size_t length = static_cast<size_t>(slash - name);
  if (length >= kPathBytes) return 0;
  for (int i = 0; i < dirs->count; i++)
    if (strlen(dirs->dir[i]) == length && strncmp(dirs->dir[i], name, length) == 0) return 0;
  memcpy(dirs->dir[dirs->count], name, length);
  dirs->dir[dirs->count][length] = '\0';
  dirs->count++;
  return 0;
}

// dlopen()s DIR SUFFIX/NAME for each name; the handle of the first that loads.
void* open_in(const char* dir, const char* suffix, char* path, size_t path_size) {
  for (const char* name : kNames) {
    char candidate[kPathBytes];
    int n = snprintf(candidate, sizeof candidate, "%s%s/%s", dir, suffix, name);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof candidate) continue;
    if (void* handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL)) {
      if (path_size) snprintf(path, path_size, "%s", candidate);
      return handle;
    }
  }
  return nullptr;
}

void* find_cupti(char* path, size_t path_size) {
  for (const char* name : kNames)
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      if (path_size) snprintf(path, path_size, "%s (already loaded)", name);
      return handle;
    }
  static CudaDirs dirs;  // control thread only; 16 KiB kept off its stack
  dirs.count = 0;
  dl_iterate_phdr(collect_cuda_dir, &dirs);
  for (int i = 0; i < dirs.count; i++)
    for (const char* suffix : kBesideCuda)
      if (void* handle = open_in(dirs.dir[i], suffix, path, path_size)) return handle;
  for (const char* name : kNames)
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      if (path_size) snprintf(path, path_size, "%s", name);
      return handle;
    }
  const char* toolkits[] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
  for (const char* toolkit : toolkits) {
    if (!toolkit || !*toolkit) continue;
    for (const char* suffix : kUnderToolkit)
      if (void* handle = open_in(toolkit, suffix, path, path_size)) return handle;
  }
  return nullptr;
}

template <typename Fn>
bool lookup(void* handle, const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(real_dlsym(handle, symbol));
  return *out != nullptr;
}

}  // namespace

bool cupti_load(CuptiApi* api, char* path, size_t path_size, char* why, size_t why_size) {
  if (path_size) path[0] = '\0';
  void* handle = find_cupti(path, path_size);
  if (!handle) {
    snprintf(why, why_size,
             "no libcupti.so found (beside libcudart/libcuda, on the library path, in $CUDA_HOME "
             "or /usr/local/cuda): driver layer off");
    return false;
  }
  lookup(handle, "cuptiSubscribe_v2", &api->subscribe_v2);
  if (!lookup(handle, "cuptiSubscribe", &api->subscribe) || !lookup(handle, "cuptiUnsubscribe", &api->unsubscribe) ||
      !lookup(handle, "cuptiEnableCallback", &api->enable_callback) ||
      !lookup(handle, "cuptiGetResultString", &api->result_string)) {
    snprintf(why, why_size, "%s lacks the CUPTI callback API: driver layer off", path);
    return false;
  }
  return true;
}

}  // namespace memtrace
