// Redirecting a function's imports in the libraries already loaded: the injected tracer's way to PyTorch's block
// layer. libc10_cuda.so calls c10::reportMemoryUsageToProfiler through its GOT (a JUMP_SLOT relocation, or
// GLOB_DAT where it takes the address or was built -fno-plt); a tracer loaded after it cannot interpose the
// name, so the slot itself is rewritten to hold our hook, and rewritten back at detach.
//
// How: dl_iterate_phdr, and per object its PT_DYNAMIC (DT_JMPREL/DT_PLTRELSZ, DT_RELA/DT_RELASZ, DT_SYMTAB,
// DT_STRTAB; RELA, as on x86-64 and aarch64): each JUMP_SLOT or GLOB_DAT relocation against an undefined symbol
// of the wanted name is a slot. Skipped: the object that holds the replacement (libmemtrace.so itself) and every
// object that defines the symbol (libc10.so: its own calls stay its own). A slot under PT_GNU_RELRO is read-only
// after loading: its page is made writable (mprotect) for the store and read-only again after it. A slot is an
// aligned pointer, so a thread calling through it sees the old function or the new one, never a torn value.
// Only the objects loaded at patch time are patched (a library dlopen()ed later keeps the real function).
#pragma once
#include <cstddef>
#include <cstdint>

namespace memtrace {

// One redirection: every import of `symbol` (its mangled name) is to reach `replacement`.
struct GotTarget {
  const char* symbol;
  void* replacement;
};

// One slot that was patched: where, what it held and what we stored.
struct GotSlot {
  void** address;
  void* old_value;
  void* new_value;
  bool read_only;  // under PT_GNU_RELRO: its page is read-only outside our stores
};

// At most this many slots are patched (the rest are counted in `missed`): a handful of libraries import the
// c10 hooks.
constexpr size_t kMaxGotSlots = 64;

struct GotPatch {
  GotSlot slots[kMaxGotSlots];
  size_t count = 0;
  size_t missed = 0;  // slots found but not patched (no room, or mprotect refused)
};

// Patches every import of each of `targets` (`target_count`) in the loaded objects; appends to `patch`. Returns
// the number of slots patched by this call. Single-threaded with respect to other patch calls (the control
// thread); safe while other threads call through the slots.
size_t got_patch_apply(const GotTarget* targets, size_t target_count, GotPatch* patch);

// Puts each patched slot back to what it held, in reverse order, and the page protection with it; a slot that
// no longer holds our value (someone else rewrote it since) is left alone. Returns the slots restored; `patch`
// is empty afterwards.
size_t got_patch_restore(GotPatch* patch);

}  // namespace memtrace
