// Portable keys of frames and call sites (stacks/frame_key.h, site_key): two traces of one program, loaded at other
// addresses and with other PythonFrame ids, give the same key for the same call site.
#include <gtest/gtest.h>

#include <memory>

#include "read/trace_reader.h"
#include "stacks/call_sites.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using Kind = PortableFrame::Kind;

constexpr uint64_t kPy = kPythonFrameBit;
const std::string kTorchBuildId = std::string("\x5a\x01\x00\xff\x42", 5);  // bytes, a NUL among them

// Where one run of the program loaded its modules (the load address; code from load + 0x1000 to load + 0x100000).
struct Layout {
  uint64_t torch = 0;   // libtorch_cuda.so, with a build id
  uint64_t train = 0;   // /opt/app/train, without one
  uint64_t python = 0;  // libpython3.12.so.1.0, the interpreter
};

void add_module(test::TraceBuilder& b, const std::string& path, uint64_t load, const std::string& build_id = "") {
  proto::Record r;
  r.mutable_module()->set_path(path);
  r.mutable_module()->set_load_address(load);
  r.mutable_module()->set_start(load + 0x1000);
  r.mutable_module()->set_end(load + 0x100000);
  r.mutable_module()->set_build_id(build_id);
  b.record(r);
}

test::TraceBuilder program(const Layout& at, std::string torch_path = "/venv/lib/torch/lib/libtorch_cuda.so") {
  test::TraceBuilder b;
  b.start();
  add_module(b, torch_path, at.torch, kTorchBuildId);
  add_module(b, "/opt/app/train", at.train);
  add_module(b, "/usr/lib/libpython3.12.so.1.0", at.python);
  return b;
}

std::unique_ptr<StackTable> load(test::TraceBuilder b, const std::string& name) {
  b.end_chunk();
  const std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  auto stacks = std::make_unique<StackTable>();
  read_trace(path, [&](const proto::Record& r) { stacks->add(r); });
  return stacks;
}

// Run 1: modules at 0x7f00'0000'0000 (torch), 0x5555'0000'0000 (train), 0x7f10'0000'0000 (python); Python frames
// 1 = train.py:42 step, 2 = train.py:7 <module>. Stack 10: torch+0x2345, an interpreter frame, step,
// train+0x1111, <module>.
std::unique_ptr<StackTable> run1(uint64_t torch_offset = 0x2345) {
  const Layout at{0x7f00'0000'0000, 0x5555'0000'0000, 0x7f10'0000'0000};
  test::TraceBuilder b = program(at);
  b.python_frame(1, "train.py", "step", 42).python_frame(2, "train.py", "<module>", 7);
  b.stack(10, {at.torch + torch_offset, at.python + 0x5000, kPy | 1, at.train + 0x1111, kPy | 2});
  return load(b, "site-key-run1.mtrace");
}

// Run 2 of the same program: other load addresses, Python ids 902 (step) and 901 (<module>), defined in the other
// order, and another interpreter frame (the interpreter's frames are no part of a site). Stack 77 is stack 10's site.
std::unique_ptr<StackTable> run2(uint64_t torch_offset = 0x2345, uint32_t step_line = 42) {
  const Layout at{0x7fa0'1234'0000, 0x5601'0000'0000, 0x7fb0'0000'0000};
  test::TraceBuilder b = program(at, "/other/venv/libtorch_cuda.so");  // same build id, another path
  b.python_frame(901, "train.py", "<module>", 7).python_frame(902, "train.py", "step", step_line);
  b.stack(77, {at.torch + torch_offset, at.python + 0x6000, kPy | 902, at.train + 0x1111, kPy | 901});
  return load(b, "site-key-run2.mtrace");
}

TEST(SiteKey, SameSiteInTwoRunsHasEqualKeys) {
  auto one = run1(), two = run2();
  std::optional<PortableSiteKey> a = site_key(*one, 10), b = site_key(*two, 77);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a <=> *b, std::strong_ordering::equal);
  // What the key holds, worked out by hand: the interpreter frame left out, offsets from the load addresses.
  ASSERT_EQ(b->frames.size(), 4u);
  EXPECT_EQ(b->frames[0].kind, Kind::kNative);
  EXPECT_EQ(*b->frames[0].module, (ModuleIdentity{true, kTorchBuildId}));
  EXPECT_EQ(b->frames[0].value, 0x2345u);
  EXPECT_EQ(b->frames[1].kind, Kind::kPython);
  EXPECT_EQ(*b->frames[1].source, (PythonSource{"train.py", "step", 42}));
  EXPECT_EQ(b->frames[2].kind, Kind::kNative);
  EXPECT_EQ(*b->frames[2].module, (ModuleIdentity{false, "/opt/app/train"}));
  EXPECT_EQ(b->frames[2].value, 0x1111u);
  EXPECT_EQ(*b->frames[3].source, (PythonSource{"train.py", "<module>", 7}));
  EXPECT_EQ(b->cuts, StackCuts{});
}

TEST(SiteKey, OtherOffsetOrLineIsAnotherSite) {
  // Keys point into their tables: the tables outlive them.
  auto one = run1(), two = run2(0x2346), three = run2(0x2345, 43);
  std::optional<PortableSiteKey> a = site_key(*one, 10);
  std::optional<PortableSiteKey> next_call = site_key(*two, 77);
  ASSERT_TRUE(a && next_call);
  EXPECT_NE(*a, *next_call);
  EXPECT_LT(*a, *next_call);  // first frames alike but the offset, 0x2345 < 0x2346
  std::optional<PortableSiteKey> other_line = site_key(*three, 77);
  ASSERT_TRUE(other_line);
  EXPECT_NE(*a, *other_line);
}

TEST(SiteKey, ModuleWithoutBuildIdIsNamedByItsPath) {
  const Layout at{0x7f00'0000'0000, 0x5555'0000'0000, 0x7f10'0000'0000};
  test::TraceBuilder b = program(at);
  add_module(b, "/opt/app/train2", 0x6000'0000'0000);  // the same bytes under another name: another module
  b.stack(1, {at.train + 0x1111});
  b.stack(2, {0x6000'0000'0000 + 0x1111});
  auto stacks = load(b, "site-key-path.mtrace");
  std::optional<PortableSiteKey> first = site_key(*stacks, 1), second = site_key(*stacks, 2);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*second->frames[0].module, (ModuleIdentity{false, "/opt/app/train2"}));
  EXPECT_NE(*first, *second);
}

// 0x1000 lies below every module: the frame keeps its address, and matches the same address in another trace only.
TEST(SiteKey, FrameInNoModuleKeepsItsAddress) {
  const Layout at{0x7f00'0000'0000, 0x5555'0000'0000, 0x7f10'0000'0000};
  test::TraceBuilder b = program(at);
  b.stack(1, {0x1000, kPy | 5});  // Python frame 5 never defined
  b.stack(2, {0x2000});
  auto stacks = load(b, "site-key-outside.mtrace");
  std::optional<PortableSiteKey> key = site_key(*stacks, 1);
  ASSERT_TRUE(key);
  ASSERT_EQ(key->frames.size(), 2u);
  EXPECT_EQ(key->frames[0].kind, Kind::kNativeOutsideModules);
  EXPECT_EQ(key->frames[0].value, 0x1000u);
  EXPECT_EQ(key->frames[0].module, nullptr);
  EXPECT_EQ(key->frames[1].kind, Kind::kPythonNotInTrace);
  EXPECT_EQ(key->frames[1].value, 5u);
  auto other = load(program({0x7fa0'1234'0000, 0x5601'0000'0000, 0x7fb0'0000'0000}).stack(3, {0x1000, kPy | 5}),
                    "site-key-outside2.mtrace");
  EXPECT_EQ(*site_key(*other, 3), *key);
  EXPECT_NE(site_key(*stacks, 2)->frames[0], key->frames[0]);
  EXPECT_FALSE(site_key(*stacks, 99));  // a stack the trace does not define has no key
}

// One trace: the grouping by portable keys is the grouping by raw values, frame for frame.
TEST(SiteKey, GroupingInOneTraceFollowsTheFrames) {
  const Layout at{0x7f00'0000'0000, 0x5555'0000'0000, 0x7f10'0000'0000};
  test::TraceBuilder b = program(at);
  b.python_frame(1, "train.py", "step", 42).python_frame(2, "train.py", "step", 43);
  b.stack(1, {at.torch + 0x10, at.python + 0x5000, kPy | 1});
  b.stack(2, {at.torch + 0x10, at.python + 0x6000, kPy | 1});          // other interpreter frame only: stack 1's site
  b.stack(3, {at.torch + 0x10, kPy | 2});                              // other line: a site of its own
  b.stack(4, {at.torch + 0x11, kPy | 1});                              // other offset: a site of its own
  b.stack(5, {at.torch + 0x10, kPy | 1}, /*native_frames_cut=*/true);  // cut: a site of its own
  auto stacks = load(b, "site-key-grouping.mtrace");
  SiteGrouping grouping(*stacks);
  EXPECT_EQ(grouping.site_of(1), 1u);
  EXPECT_EQ(grouping.site_of(2), 1u);
  EXPECT_EQ(grouping.site_of(3), 3u);
  EXPECT_EQ(grouping.site_of(4), 4u);
  EXPECT_EQ(grouping.site_of(5), 5u);
  EXPECT_EQ(grouping.site_of(99), 99u);
}

}  // namespace
}  // namespace memtrace
