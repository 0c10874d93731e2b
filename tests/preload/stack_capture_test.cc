// capture_stack's native depth where one hook path (one Api) is reached with different counts of the tracer's
// own frames. In this test program the tracer's own code range (stack_capture_init looks up the object that holds
// stack_capture.cc) is the whole test executable, so every frame of this file counts as "ours", and the frames
// beyond them are libc's thread start (start_thread, clone3): two, more than the one kept.
#include <pthread.h>

#include <gtest/gtest.h>

#include "record/schema.h"
#include "stacks/intern_table.h"
#include "stacks/stack_capture.h"

namespace memtrace {
// The Python frame reader is not linked here: stand-ins. With with_python, the thread has no Python frames of its own,
// and the waiting thread's, when g_backward_frame is set, are that one frame.
PythonFrameView g_backward_frame;
bool g_in_backward = false;
int python_frames_read(PythonFrameView*, int, bool* cut) {
  if (cut) *cut = false;
  return 0;
}
int python_frames_read_backward(PythonFrameView* out, int capacity, bool* cut) {
  if (cut) *cut = false;
  if (!g_in_backward || capacity < 1) return 0;
  out[0] = g_backward_frame;
  return 1;
}
void python_eval_range(uintptr_t* begin, uintptr_t* end) { *begin = *end = 0; }
}  // namespace memtrace

namespace {

constexpr uint8_t kPath = 7;  // any Api value: only the learned count per path matters here

struct Captured {
  int shallow_native = -1;  // native frames kept by the first capture, 3 of our frames deep
  int deep_native = -1;     // by the second on the same path, 5 of our frames deep
};

// One more of our frames per level: not inlined, and the addition after the call keeps it from being a tail call.
__attribute__((noinline)) int capture_below(int levels, memtrace::CapturedStack* stack) {
  if (levels == 0) {
    memtrace::capture_stack(stack, /*max_native=*/1, /*max_native_with_python=*/1, /*with_python=*/false, kPath);
    return stack->frame_count;
  }
  int kept = capture_below(levels - 1, stack);
  asm volatile("" ::: "memory");
  return kept + 0 * levels;
}

void* capture_both(void* arg) {
  auto* out = static_cast<Captured*>(arg);
  static memtrace::CapturedStack stack;
  // Ours: capture_stack, capture_below(0) and this function: the path learns 3.
  out->shallow_native = capture_below(0, &stack);
  // Ours: capture_stack, capture_below at levels 2, 1 and 0, and this function: 5, within the
  // room of 5 that an unseen path gets in an optimized build.
  out->deep_native = capture_below(2, &stack);
  return nullptr;
}

// Asking for 1 native frame: the first capture keeps start_thread, 1 frame. The second has 2 more of our frames
// than the path learned (5 against 3); it must still keep 1 frame, not none: before the learned count,
// a fixed room of 5 unwound 1 + 5 = 6 frames and kept the one beyond our 5.
TEST(CaptureStack, DeeperPathThanLearnedKeepsTheFramesAskedFor) {
  ASSERT_TRUE(memtrace::stack_capture_init());  // libunwind.so.8 (libunwind-dev) must be installed
  Captured captured;
  pthread_t thread;
  ASSERT_EQ(0, pthread_create(&thread, nullptr, capture_both, &captured));
  ASSERT_EQ(0, pthread_join(thread, nullptr));
  EXPECT_EQ(1, captured.shallow_native);
  EXPECT_EQ(1, captured.deep_native);
}

// The cut flag, on a thread whose stack beyond our own frames is start_thread and clone3 (2 frames, see the top).
struct CutCaptures {
  memtrace::CapturedStack one;    // 1 native frame asked for: start_thread kept, clone3 left out
  memtrace::CapturedStack eight;  // 8 asked for: both kept, the unwind reaches the bottom
};

__attribute__((noinline)) void* capture_cut_and_complete(void* arg) {
  auto* out = static_cast<CutCaptures*>(arg);
  memtrace::capture_stack(&out->one, /*max_native=*/1, /*max_native_with_python=*/1, /*with_python=*/false, kPath + 1);
  asm volatile("" ::: "memory");
  memtrace::capture_stack(&out->eight, /*max_native=*/8, /*max_native_with_python=*/8, /*with_python=*/false,
                          kPath + 1);
  asm volatile("" ::: "memory");
  return nullptr;
}

TEST(CaptureStack, MarksAStackCutAtTheDepthAndNotOneThatEnds) {
  ASSERT_TRUE(memtrace::stack_capture_init());
  static CutCaptures captured;
  pthread_t thread;
  ASSERT_EQ(0, pthread_create(&thread, nullptr, capture_cut_and_complete, &captured));
  ASSERT_EQ(0, pthread_join(thread, nullptr));
  ASSERT_EQ(1, captured.one.frame_count);
  EXPECT_TRUE(captured.one.native_cut);  // clone3 was unwound and left out
  EXPECT_FALSE(captured.one.python_cut);
  ASSERT_EQ(2, captured.eight.frame_count);
  EXPECT_FALSE(captured.eight.native_cut);  // 2 of 8 kept: the unwind ended at the stack's bottom
  EXPECT_FALSE(captured.eight.python_cut);
  EXPECT_EQ(captured.one.frames[0], captured.eight.frames[0]);  // the same start_thread return address
  // The key of the cut stack: its one frame, then the count 1 with the native flag in bit 62. Without the flag it
  // would be the key of an uncut stack of the same frame: a different stack.
  const uint64_t folded = memtrace::hash_step(memtrace::kHashSeed, captured.one.frames[0]);
  EXPECT_EQ(memtrace::nonzero_key(memtrace::hash_u64(folded, 1 | uint64_t{1} << 62)), captured.one.key);
  EXPECT_NE(memtrace::nonzero_key(memtrace::hash_u64(folded, 1)), captured.one.key);
}

// A thread without Python frames while another waits in backward: the waiting thread's frame follows the native
// ones (start_thread, clone3: all 8 asked for are kept, max_native, not max_native_with_python's 1), flagged, and the
// flag is part of the key; with no thread in backward the same capture has native frames only and no flag.
struct BackwardCaptures {
  memtrace::CapturedStack borrowed;
  memtrace::CapturedStack alone;
};

__attribute__((noinline)) void* capture_borrowed_and_alone(void* arg) {
  auto* out = static_cast<BackwardCaptures*>(arg);
  memtrace::g_in_backward = true;
  memtrace::capture_stack(&out->borrowed, /*max_native=*/8, /*max_native_with_python=*/1, /*with_python=*/true,
                          kPath + 2);
  asm volatile("" ::: "memory");
  memtrace::g_in_backward = false;
  memtrace::capture_stack(&out->alone, /*max_native=*/8, /*max_native_with_python=*/1, /*with_python=*/true, kPath + 2);
  asm volatile("" ::: "memory");
  return nullptr;
}

TEST(CaptureStack, BorrowsTheFramesOfTheThreadInBackward) {
  ASSERT_TRUE(memtrace::stack_capture_init());
  memtrace::g_backward_frame = {"graph.py", 8, "_engine_run_backward", 20, 42, 0xABCDu, true};
  static BackwardCaptures captured;
  pthread_t thread;
  ASSERT_EQ(0, pthread_create(&thread, nullptr, capture_borrowed_and_alone, &captured));
  ASSERT_EQ(0, pthread_join(thread, nullptr));
  const memtrace::CapturedStack& b = captured.borrowed;
  ASSERT_EQ(3, b.frame_count);  // start_thread, clone3, the borrowed frame
  EXPECT_EQ(1, b.python_count);
  EXPECT_TRUE(b.python_from_backward);
  EXPECT_FALSE(b.native_cut);
  EXPECT_EQ(memtrace::kPythonFrameBit | 0, b.frames[2]);
  EXPECT_EQ(0u, b.frames[0] & memtrace::kPythonFrameBit);
  EXPECT_EQ(0u, b.frames[1] & memtrace::kPythonFrameBit);
  // Key: the two native frames, the Python frame's key, then the count 3 with the backward flag in bit 61.
  uint64_t folded = memtrace::hash_step(memtrace::kHashSeed, b.frames[0]);
  folded = memtrace::hash_step(folded, b.frames[1]);
  folded = memtrace::hash_step(folded, 0xABCDu);
  EXPECT_EQ(memtrace::nonzero_key(memtrace::hash_u64(folded, 3 | uint64_t{1} << 61)), b.key);
  EXPECT_NE(memtrace::nonzero_key(memtrace::hash_u64(folded, 3)), b.key);

  const memtrace::CapturedStack& a = captured.alone;
  ASSERT_EQ(2, a.frame_count);
  EXPECT_EQ(0, a.python_count);
  EXPECT_FALSE(a.python_from_backward);
  EXPECT_EQ(b.frames[0], a.frames[0]);
  EXPECT_EQ(b.frames[1], a.frames[1]);
}

}  // namespace
