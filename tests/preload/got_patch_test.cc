// got_patch.h on CPU: three libraries import got_callee from a fourth by name: two call it (a JUMP_SLOT each), one
// lazily bound with a writable .got.plt, one -z relro -z now with a read-only GOT; the third takes its address (a
// GLOB_DAT slot, read-only under RELRO). Their slots are patched to a function of this test and restored.
#include "attach/got_patch.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

extern "C" int lazy_call(int x);
extern "C" int now_call(int x);
extern "C" void* taker_address();
extern "C" int got_callee(int x);

namespace {

int replacement(int x) { return x + 100; }
int someone_elses(int x) { return x + 1000; }

// The protection /proc/self/maps gives the page of `address` ("r--p", "rw-p"...).
std::string protection_of(const void* address) {
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[512];
  std::string found;
  while (maps && fgets(line, sizeof line, maps)) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (sscanf(line, "%lx-%lx %4s", &start, &end, perms) == 3 && reinterpret_cast<unsigned long>(address) >= start &&
        reinterpret_cast<unsigned long>(address) < end)
      found = perms;
  }
  if (maps) fclose(maps);
  return found;
}

const memtrace::GotTarget kTarget{"got_callee", reinterpret_cast<void*>(&replacement)};

TEST(GotPatch, RedirectsEveryImportAndRestoresIt) {
  // lazy_call has never run: its JUMP_SLOT still holds the PLT's resolver stub, which restore must put back.
  memtrace::GotPatch patch;
  // One slot in each of the three. None in libgot_callee.so, which defines the name, and none in this test, which
  // holds the replacement.
  ASSERT_EQ(memtrace::got_patch_apply(&kTarget, 1, &patch), 3u);
  EXPECT_EQ(patch.count, 3u);
  EXPECT_EQ(patch.missed, 0u);
  EXPECT_EQ(lazy_call(1), 101);
  EXPECT_EQ(now_call(1), 101);
  EXPECT_EQ(taker_address(), reinterpret_cast<void*>(&replacement));
  size_t read_only = 0;
  void* old_values[memtrace::kMaxGotSlots];
  void** addresses[memtrace::kMaxGotSlots];
  bool read_only_at[memtrace::kMaxGotSlots];
  for (size_t i = 0; i < patch.count; i++) {
    old_values[i] = patch.slots[i].old_value;
    addresses[i] = patch.slots[i].address;
    read_only_at[i] = patch.slots[i].read_only;
    if (patch.slots[i].read_only) {
      read_only++;
      EXPECT_EQ(protection_of(patch.slots[i].address), "r--p") << "slot " << i << " left writable";
    }
  }
  // -z now puts libgot_caller_now.so's JUMP_SLOT under RELRO, and libgot_taker.so's GLOB_DAT is in its .got, under
  // RELRO too (-z relro); libgot_caller_lazy.so's JUMP_SLOT is in the writable .got.plt.
  EXPECT_EQ(read_only, 2u);

  const size_t count = patch.count;
  EXPECT_EQ(memtrace::got_patch_restore(&patch), 3u);
  EXPECT_EQ(patch.count, 0u);
  for (size_t i = 0; i < count; i++) EXPECT_EQ(*addresses[i], old_values[i]) << "slot " << i;
  EXPECT_EQ(lazy_call(1), 2);  // resolved lazily now, to libgot_callee.so's function
  EXPECT_EQ(now_call(1), 2);
  EXPECT_EQ(taker_address(), reinterpret_cast<void*>(&got_callee));
  for (size_t i = 0; i < count; i++)
    EXPECT_EQ(protection_of(addresses[i]), read_only_at[i] ? "r--p" : "rw-p") << "slot " << i;
}

TEST(GotPatch, LeavesASlotSomeoneElseRewrote) {
  memtrace::GotPatch patch;
  ASSERT_EQ(memtrace::got_patch_apply(&kTarget, 1, &patch), 3u);
  // Another tool rewrites libgot_caller_lazy.so's JUMP_SLOT (the one writable slot) after us.
  void** writable = nullptr;
  void* old_value = nullptr;
  for (size_t i = 0; i < patch.count; i++)
    if (!patch.slots[i].read_only) {
      writable = patch.slots[i].address;
      old_value = patch.slots[i].old_value;
    }
  ASSERT_NE(writable, nullptr);
  *writable = reinterpret_cast<void*>(&someone_elses);
  EXPECT_EQ(memtrace::got_patch_restore(&patch), 2u);
  EXPECT_EQ(*writable, reinterpret_cast<void*>(&someone_elses));
  EXPECT_EQ(lazy_call(1), 1001);
  *writable = old_value;
  EXPECT_EQ(lazy_call(1), 2);
}

TEST(GotPatch, PatchesNothingForANameNobodyImports) {
  memtrace::GotPatch patch;
  const memtrace::GotTarget target{"got_nobody_imports_this", reinterpret_cast<void*>(&replacement)};
  EXPECT_EQ(memtrace::got_patch_apply(&target, 1, &patch), 0u);
  EXPECT_EQ(memtrace::got_patch_restore(&patch), 0u);
}

}  // namespace
