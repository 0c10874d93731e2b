#include "attach/got_patch.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace memtrace {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
#error "got_patch.cc knows the RELA relocations of x86-64 and aarch64 only"
#endif

struct Walk {
  const GotTarget* targets;
  size_t target_count;
  GotPatch* patch;
  uintptr_t skip_base;  // the object holding the replacements
  size_t patched;
};

// A dynamic-section address: glibc rewrites most entries to absolute addresses when it loads an object, but not
// everywhere (the vDSO, read-only dynamic sections): an entry below the load base is still an offset.
uintptr_t dynamic_address(ElfW(Addr) value, uintptr_t base) { return value < base ? base + value : value; }

bool in_range(uintptr_t address, uintptr_t start, uintptr_t end) { return address >= start && address < end; }

uintptr_t page_of(uintptr_t address) {
  static const uintptr_t page_bytes = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return address & ~(page_bytes - 1);
}

size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// Stores `value` in `slot`, making a read-only page writable around the store. False when mprotect refused.
bool store_slot(void** slot, void* value, bool read_only) {
  void* page = reinterpret_cast<void*>(page_of(reinterpret_cast<uintptr_t>(slot)));
  if (read_only && mprotect(page, page_bytes(), PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
  if (read_only) mprotect(page, page_bytes(), PROT_READ);
  return true;
}

// The target a relocation's symbol names, or null: an import (undefined here) of one of the wanted names. The
// object that defines the name (libc10.so) has it defined in its own symbol table, so its slots are never ours.
const GotTarget* wanted(const Walk& walk, const ElfW(Sym) * symtab, const char* strtab, uint32_t symbol_index) {
  const ElfW(Sym)& symbol = symtab[symbol_index];
  if (symbol.st_shndx != SHN_UNDEF || symbol.st_name == 0) return nullptr;
  const char* name = strtab + symbol.st_name;
  for (size_t i = 0; i < walk.target_count; i++)
    if (strcmp(name, walk.targets[i].symbol) == 0) return &walk.targets[i];
  return nullptr;
}

void patch_relocations(Walk* walk, uintptr_t base, const ElfW(Rela) * relas, size_t count, const ElfW(Sym) * symtab,
                       const char* strtab, uintptr_t relro_start, uintptr_t relro_end) {
  for (size_t i = 0; i < count; i++) {
    uint32_t type = static_cast<uint32_t>(ELF64_R_TYPE(relas[i].r_info));
    if (type != kJumpSlot && type != kGlobDat) continue;
    const GotTarget* target = wanted(*walk, symtab, strtab, static_cast<uint32_t>(ELF64_R_SYM(relas[i].r_info)));
    if (!target) continue;
    auto** slot = reinterpret_cast<void**>(base + relas[i].r_offset);
    GotPatch* patch = walk->patch;
    bool already = false;  // a slot both relocation tables name, or one patched by an earlier call
    for (size_t s = 0; s < patch->count; s++) already = already || patch->slots[s].address == slot;
    if (already) continue;
    if (patch->count == kMaxGotSlots) {
      patch->missed++;
      continue;
    }
    bool read_only = in_range(reinterpret_cast<uintptr_t>(slot), relro_start, relro_end);
    void* old_value = __atomic_load_n(slot, __ATOMIC_SEQ_CST);
    if (!store_slot(slot, target->replacement, read_only)) {
      patch->missed++;
      continue;
    }
    patch->slots[patch->count++] = GotSlot{slot, old_value, target->replacement, read_only};
    walk->patched++;
  }
}

int visit_object(dl_phdr_info* info, size_t, void* data) {
  auto* walk = static_cast<Walk*>(data);
  uintptr_t base = info->dlpi_addr;
  if (base == walk->skip_base && base != 0) return 0;
  const ElfW(Dyn)* dynamic = nullptr;
  uintptr_t relro_start = 0, relro_end = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dynamic = reinterpret_cast<const ElfW(Dyn)*>(base + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_start = page_of(base + ph.p_vaddr);
      relro_end = base + ph.p_vaddr + ph.p_memsz;
    }
  }
  if (!dynamic) return 0;
  uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
  size_t jmprel_bytes = 0, rela_bytes = 0;
  bool rela_plt = true;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
      case DT_JMPREL: jmprel = dynamic_address(d->d_un.d_ptr, base); break;
      case DT_PLTRELSZ: jmprel_bytes = d->d_un.d_val; break;
      case DT_PLTREL: rela_plt = d->d_un.d_val == DT_RELA; break;
      case DT_RELA: rela = dynamic_address(d->d_un.d_ptr, base); break;
      case DT_RELASZ: rela_bytes = d->d_un.d_val; break;
      case DT_SYMTAB: symtab = dynamic_address(d->d_un.d_ptr, base); break;
      case DT_STRTAB: strtab = dynamic_address(d->d_un.d_ptr, base); break;
      default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  const auto* symbols = reinterpret_cast<const ElfW(Sym)*>(symtab);
  const auto* strings = reinterpret_cast<const char*>(strtab);
  const auto* plt = reinterpret_cast<const ElfW(Rela)*>(jmprel);
  const auto* other = reinterpret_cast<const ElfW(Rela)*>(rela);
  size_t plt_count = jmprel && rela_plt ? jmprel_bytes / sizeof(ElfW(Rela)) : 0;
  size_t other_count = rela ? rela_bytes / sizeof(ElfW(Rela)) : 0;
  patch_relocations(walk, base, plt, plt_count, symbols, strings, relro_start, relro_end);
  patch_relocations(walk, base, other, other_count, symbols, strings, relro_start, relro_end);
  return 0;
}

}  // namespace

size_t got_patch_apply(const GotTarget* targets, size_t target_count, GotPatch* patch) {
  if (target_count == 0) return 0;
  Walk walk{targets, target_count, patch, 0, 0};
  Dl_info own{};
  link_map* own_map = nullptr;
  if (dladdr1(targets[0].replacement, &own, reinterpret_cast<void**>(&own_map), RTLD_DL_LINKMAP) && own_map)
    walk.skip_base = own_map->l_addr;  // the load bias, as dl_iterate_phdr's dlpi_addr gives it
  dl_iterate_phdr(visit_object, &walk);
  return walk.patched;
}

size_t got_patch_restore(GotPatch* patch) {
  size_t restored = 0;
  for (size_t i = patch->count; i-- > 0;) {
    const GotSlot& slot = patch->slots[i];
    if (__atomic_load_n(slot.address, __ATOMIC_SEQ_CST) != slot.new_value) continue;
    if (store_slot(slot.address, slot.old_value, slot.read_only)) restored++;
  }
  patch->count = 0;
  patch->missed = 0;
  return restored;
}

}  // namespace memtrace
