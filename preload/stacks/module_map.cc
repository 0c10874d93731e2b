#include "stacks/module_map.h"

#include <link.h>
#include <unistd.h>

#include <cstring>

#include "stacks/intern_table.h"

namespace memtrace {
namespace {

InternTable g_reported;
unsigned long long g_last_adds = ~0ULL;
unsigned long long g_last_subs = ~0ULL;
bool g_emit_refused = false;  // an object's record could not be written: look again at the next call

struct EmitContext {
  bool (*emit)(const ModuleView&, void*);
  void* ctx;
  char exe_path[4096];
};

// The GNU build id note (NT_GNU_BUILD_ID, name "GNU") inside a PT_NOTE segment, or null.
const uint8_t* find_build_id(const dl_phdr_info* info, size_t* size) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr)* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const uint8_t* name = p + sizeof(ElfW(Nhdr));
      const uint8_t* desc = name + ((note->n_namesz + 3) & ~3u);
      const uint8_t* next = desc + ((note->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        *size = note->n_descsz;
        return desc;
      }
      p = next;
    }
  }
  *size = 0;
  return nullptr;
}

int visit(dl_phdr_info* info, size_t, void* data) {
  EmitContext* c = static_cast<EmitContext*>(data);
  const char* path = info->dlpi_name;
  if (!path || !*path) path = c->exe_path;  // the main program has an empty name
  if (strncmp(path, "linux-vdso", 10) == 0 || strncmp(path, "linux-gate", 10) == 0) return 0;

  uint64_t start = ~0ULL, end = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    uint64_t b = info->dlpi_addr + ph.p_vaddr;
    if (b < start) start = b;
    if (b + ph.p_memsz > end) end = b + ph.p_memsz;
  }
  if (end == 0) return 0;

  uint64_t key = nonzero_key(hash_u64(hash_bytes(kHashSeed, path, strlen(path)), info->dlpi_addr));
  if (g_reported.find(key) || g_reported.full()) return 0;

  ModuleView m{path, info->dlpi_addr, start, end, nullptr, 0};
  m.build_id = find_build_id(info, &m.build_id_size);
  if (c->emit(m, c->ctx)) g_reported.insert(key);
  else g_emit_refused = true;
  return 0;
}

int read_counters(dl_phdr_info* info, size_t size, void* data) {
  auto* counters = static_cast<unsigned long long*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    counters[0] = info->dlpi_adds;
    counters[1] = info->dlpi_subs;
  }
  return 1;  // the counters are the same in every entry: stop after the first
}

}  // namespace

bool module_map_changed() {
  unsigned long long counters[2] = {0, 0};
  dl_iterate_phdr(read_counters, counters);
  bool changed = counters[0] != g_last_adds || counters[1] != g_last_subs || g_emit_refused;
  g_emit_refused = false;
  g_last_adds = counters[0];
  g_last_subs = counters[1];
  return changed;
}

void module_map_emit_new(bool (*emit)(const ModuleView&, void* ctx), void* ctx) {
  static bool initialized = g_reported.init(1 << 14);
  if (!initialized) return;
  EmitContext c{emit, ctx, {}};
  ssize_t n = readlink("/proc/self/exe", c.exe_path, sizeof c.exe_path - 1);
  c.exe_path[n > 0 ? n : 0] = '\0';
  dl_iterate_phdr(visit, &c);
}

void module_map_reset() {
  g_reported.clear();
  g_last_adds = g_last_subs = ~0ULL;
  g_emit_refused = false;
}

}  // namespace memtrace
