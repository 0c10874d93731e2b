// Call sites as the reports show them: stacks that differ only in the Python interpreter's own native frames
// are one site (SiteGrouping), with hand-computed totals.
#include <gtest/gtest.h>

#include "stacks/call_sites.h"

namespace memtrace {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

// Module layout of the traces below: [start, end) of each module's code.
constexpr uint64_t kLibpython = 0x10000;  // libpython3.13.so.1.0: the interpreter
constexpr uint64_t kLibffi = 0x20000;     // libffi.so.8
constexpr uint64_t kLibc = 0x30000;       // libc.so.6
constexpr uint64_t kPythonExe = 0x40000;  // python3.13: the interpreter too
constexpr uint64_t kModuleSize = 0x1000;

uint64_t py(uint64_t python_frame_id) { return kPythonFrameBit | python_frame_id; }

class SiteGroupingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    add_module("/usr/lib/libpython3.13.so.1.0", kLibpython);
    add_module("/lib/x86_64-linux-gnu/libffi.so.8", kLibffi);
    add_module("/lib/x86_64-linux-gnu/libc.so.6", kLibc);
    add_module("/root/.pyenv/versions/3.13.0/bin/python3.13", kPythonExe);
  }
  void add_module(const std::string& path, uint64_t start) {
    proto::Record r;
    r.mutable_module()->set_path(path);
    r.mutable_module()->set_load_address(start);
    r.mutable_module()->set_start(start);
    r.mutable_module()->set_end(start + kModuleSize);
    stacks.add(r);
  }
  void add_stack(uint64_t id, std::vector<uint64_t> frames, bool native_cut = false) {
    proto::Record r;
    r.mutable_stack()->set_id(id);
    for (uint64_t f : frames) r.mutable_stack()->add_frames(f);
    r.mutable_stack()->set_native_frames_cut(native_cut);
    stacks.add(r);
  }
  StackTable stacks;
};

LiveAllocation alloc(int32_t device, uint64_t stack_id, uint64_t size, int64_t time_ns) {
  LiveAllocation a;
  a.space = AddressSpace::kDriverPointer;
  a.device = device;
  a.stack_id = stack_id;
  a.size_bytes = size;
  a.time_ns = time_ns;
  return a;
}

TEST(InterpreterModules, LibpythonAndThePythonExecutable) {
  EXPECT_TRUE(is_python_interpreter_module("libpython3.13.so.1.0"));
  EXPECT_TRUE(is_python_interpreter_module("libpython3.11.so"));
  EXPECT_TRUE(is_python_interpreter_module("python3.13"));
  EXPECT_TRUE(is_python_interpreter_module("python"));
  EXPECT_FALSE(is_python_interpreter_module("_ctypes.cpython-313-x86_64-linux-gnu.so"));
  EXPECT_FALSE(is_python_interpreter_module("libffi.so.8"));
  EXPECT_FALSE(is_python_interpreter_module("python3-config"));
}

TEST_F(SiteGroupingTest, AddressesInTheInterpretersModulesOnly) {
  EXPECT_TRUE(stacks.in_python_interpreter(kLibpython));
  EXPECT_TRUE(stacks.in_python_interpreter(kLibpython + kModuleSize - 1));
  EXPECT_FALSE(stacks.in_python_interpreter(kLibpython + kModuleSize));  // past libpython's end, before libffi
  EXPECT_FALSE(stacks.in_python_interpreter(kLibffi + 0x10));
  EXPECT_TRUE(stacks.in_python_interpreter(kPythonExe + 0x10));
  EXPECT_FALSE(stacks.in_python_interpreter(0x10));  // below every module
}

// CPython 3.13: the first DeviceBuffer(...) goes through slot_tp_init/type_call, the later ones through the
// specialized call path. The two stacks have the same libffi frame and Python frames 1, 2, 3, and different
// interpreter frames: one site.
TEST_F(SiteGroupingTest, StacksDifferingOnlyInInterpreterFramesAreOneSite) {
  add_stack(7, {kLibffi + 0x10, kLibpython + 0x100, py(1), py(2), py(3), kLibpython + 0x900});
  add_stack(8, {kLibffi + 0x10, kLibpython + 0x100, py(1), kLibpython + 0x200, kLibpython + 0x300, kLibpython + 0x100,
                py(2), py(3), kLibpython + 0x900, kPythonExe + 0x10});
  // Stack 7: 4 allocations of 4 MiB later on; stack 8: the first one, 4 MiB. And stack 7 on device 1 apart.
  std::vector<LiveAllocation> live = {alloc(0, 8, 4 << 20, 1), alloc(0, 7, 4 << 20, 2), alloc(0, 7, 4 << 20, 3),
                                      alloc(0, 7, 4 << 20, 4), alloc(0, 7, 4 << 20, 5), alloc(1, 7, 100, 6)};
  SiteGrouping grouping(stacks);
  EXPECT_EQ(grouping.site_of(8), grouping.site_of(7));
  std::vector<CallSite> sites = group_by_call_site(live, grouping);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].device, 0);
  EXPECT_EQ(sites[0].bytes, 20u << 20);  // 5 x 4 MiB = 20971520
  EXPECT_EQ(sites[0].count, 5u);
  EXPECT_EQ(sites[0].stack_count, 2u);
  EXPECT_EQ(sites[0].stack_id, 7u);  // 16 MiB against stack 8's 4 MiB: its frames are shown
  EXPECT_EQ(sites[1].device, 1);     // the same stack on another device stays its own site
  EXPECT_EQ(sites[1].bytes, 100u);
  EXPECT_EQ(sites[1].count, 1u);
  EXPECT_EQ(sites[1].stack_count, 1u);

  // Without the grouping, each stack is its own site, as before.
  std::vector<CallSite> per_stack = group_by_call_site(live);
  ASSERT_EQ(per_stack.size(), 3u);
  EXPECT_EQ(per_stack[0].bytes, 16u << 20);
  EXPECT_EQ(per_stack[1].bytes, 4u << 20);
}

// Two C++ paths under one Python line (two libffi return addresses) are two sites, whatever the interpreter did.
TEST_F(SiteGroupingTest, StacksDifferingInANonInterpreterFrameAreTwoSites) {
  add_stack(1, {kLibffi + 0x10, kLibpython + 0x100, py(1), py(2)});
  add_stack(2, {kLibffi + 0x20, kLibpython + 0x100, py(1), py(2)});
  SiteGrouping grouping(stacks);
  std::vector<CallSite> sites =
      group_by_call_site({alloc(0, 1, 300, 0), alloc(0, 2, 100, 0), alloc(0, 2, 100, 0)}, grouping);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].stack_id, 1u);  // 300 bytes in 1
  EXPECT_EQ(sites[0].bytes, 300u);
  EXPECT_EQ(sites[0].count, 1u);
  EXPECT_EQ(sites[0].stack_count, 1u);
  EXPECT_EQ(sites[1].stack_id, 2u);  // 100 + 100 = 200 bytes in 2
  EXPECT_EQ(sites[1].bytes, 200u);
  EXPECT_EQ(sites[1].count, 2u);
  EXPECT_EQ(sites[1].stack_count, 1u);
}

// A different Python frame is a different site too, and so is the same frames with outer Python frames cut.
TEST_F(SiteGroupingTest, PythonFramesAndCutMarksSeparateSites) {
  add_stack(1, {kLibffi + 0x10, py(1), py(2)});
  add_stack(2, {kLibffi + 0x10, py(1), py(4)});
  add_stack(3, {kLibffi + 0x10, kLibpython + 0x100, py(1), py(2)});
  proto::Record cut;
  cut.mutable_stack()->set_id(4);
  for (uint64_t f : {kLibffi + 0x10, py(1), py(2)}) cut.mutable_stack()->add_frames(f);
  cut.mutable_stack()->set_python_frames_cut(true);
  stacks.add(cut);
  SiteGrouping grouping(stacks);
  EXPECT_NE(grouping.site_of(1), grouping.site_of(2));
  EXPECT_EQ(grouping.site_of(1), grouping.site_of(3));
  EXPECT_NE(grouping.site_of(1), grouping.site_of(4));
}

// The tracer keeps the innermost native frames, interpreter frames included: the stack with more interpreter
// frames loses the outer libc frame to the cut. On cut stacks, native frames past the outermost Python frame do
// not separate sites; on whole stacks they do (an embedding program calling Python from two places).
TEST_F(SiteGroupingTest, OuterNativeFramesOfCutStacksDoNotSeparateSites) {
  add_stack(1, {kLibffi + 0x10, py(1), kLibpython + 0x100, py(2), kLibpython + 0x900, kLibc + 0x10}, true);
  add_stack(2,
            {kLibffi + 0x10, py(1), kLibpython + 0x100, kLibpython + 0x200, kLibpython + 0x300, py(2),
             kLibpython + 0x900},
            true);
  add_stack(3, {kLibffi + 0x10, py(1), py(2), kLibc + 0x10});
  add_stack(4, {kLibffi + 0x10, py(1), py(2), kLibc + 0x20});
  add_stack(5, {kLibffi + 0x10, py(1), py(2)});
  SiteGrouping grouping(stacks);
  EXPECT_EQ(grouping.site_of(1), grouping.site_of(2));
  EXPECT_NE(grouping.site_of(3), grouping.site_of(4));
  EXPECT_NE(grouping.site_of(1), grouping.site_of(5));  // cut and whole: the cut one may have had more
  EXPECT_NE(grouping.site_of(1), grouping.site_of(3));
}

// Stacks the trace never defined are each their own site: nothing to compare.
TEST_F(SiteGroupingTest, UnknownStacksAreTheirOwnSites) {
  SiteGrouping grouping(stacks);
  EXPECT_EQ(grouping.site_of(0), 0u);
  EXPECT_EQ(grouping.site_of(99), 99u);
  EXPECT_EQ(grouping.site_of(98), 98u);
}

// The growth rule decides per merged site. Stack 2 (the first call) keeps 1 MiB at 1 s; stack 1 (the later
// calls) keeps 1 MiB at 3 s and 5 s; exit at 6 s. Apart, stack 1 has 2 allocations (< 3: not growing) and
// stack 2 one. Merged: 3 allocations spanning 5 - 1 = 4 s of a window 6 - min(1, first times 1 and 2) = 5 s,
// 2 x 4 >= 5: growing, 1 MiB per step, intervals 2 s and 2 s: median 2 s.
TEST_F(SiteGroupingTest, GrowthIsDecidedOverTheMergedSite) {
  add_stack(1, {kLibffi + 0x10, kLibpython + 0x100, py(1)});
  add_stack(2, {kLibffi + 0x10, kLibpython + 0x200, kLibpython + 0x300, py(1)});
  std::vector<LiveAllocation> live = {alloc(0, 2, 1 << 20, 1 * kSecond), alloc(0, 1, 1 << 20, 3 * kSecond),
                                      alloc(0, 1, 1 << 20, 5 * kSecond)};
  FirstAllocationTimes first = {{{0, 1}, 2 * kSecond}, {{0, 2}, 1 * kSecond}};

  std::vector<LeakSite> apart = find_leak_sites(live, 6 * kSecond, first);
  ASSERT_EQ(apart.size(), 2u);
  EXPECT_FALSE(apart[0].growing);
  EXPECT_FALSE(apart[1].growing);

  std::vector<LeakSite> leaks = find_leak_sites(live, 6 * kSecond, first, SiteGrouping(stacks));
  ASSERT_EQ(leaks.size(), 1u);
  const LeakSite& l = leaks[0];
  EXPECT_EQ(l.site.bytes, 3u << 20);
  EXPECT_EQ(l.site.count, 3u);
  EXPECT_EQ(l.site.stack_count, 2u);
  EXPECT_EQ(l.site.stack_id, 1u);  // 2 MiB against 1 MiB
  EXPECT_TRUE(l.growing);
  EXPECT_EQ(l.growth_count, 3u);
  EXPECT_EQ(l.growth_bytes_per_step, 1u << 20);
  EXPECT_DOUBLE_EQ(l.median_interval_s, 2.0);
}

// The site starts at the earliest first allocation of its stacks. Stack 1 kept 3 allocations at 8, 9 and
// 10 s, exit at 10 s, and first allocated at 8 s; stack 3 first allocated at 2 s. Stack 1 alone: span
// 10 - 8 = 2 s of a window 10 - 8 = 2 s, 2 x 2 >= 2: growing. With one allocation of stack 3 live at 9.5 s: 4
// allocations spanning 2 s of a window 10 - min(8, 2) = 8 s, 2 x 2 < 8: not growing (what the site allocated
// from 2 s to 8 s was freed).
TEST_F(SiteGroupingTest, MergedSiteStartsAtItsEarliestStack) {
  add_stack(1, {kLibffi + 0x10, kLibpython + 0x100, py(1)});
  add_stack(3, {kLibffi + 0x10, kLibpython + 0x200, py(1)});
  std::vector<LiveAllocation> live = {alloc(0, 1, 64, 8 * kSecond), alloc(0, 1, 64, 9 * kSecond),
                                      alloc(0, 1, 64, 10 * kSecond)};
  FirstAllocationTimes first = {{{0, 1}, 8 * kSecond}, {{0, 3}, 2 * kSecond}};
  SiteGrouping grouping(stacks);
  std::vector<LeakSite> alone = find_leak_sites(live, 10 * kSecond, first, grouping);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_TRUE(alone[0].growing);
  live.push_back(alloc(0, 3, 64, 9 * kSecond + kSecond / 2));
  std::vector<LeakSite> merged = find_leak_sites(live, 10 * kSecond, first, grouping);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].site.count, 4u);
  EXPECT_EQ(merged[0].site.bytes, 256u);
  EXPECT_FALSE(merged[0].growing);
}

}  // namespace
}  // namespace memtrace
