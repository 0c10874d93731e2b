// Captures the calling thread's stack inside a hook: native return addresses through libunwind, with the
// thread's Python frames spliced in place of the interpreter's evaluation-loop frames that run them.
// Called with no lock held (unwinding can take the loader's lock through dl_iterate_phdr).
#pragma once
#include <cstdint>

#include "stacks/python_frames.h"

namespace memtrace {

constexpr int kMaxNativeFrames = 256;
constexpr int kMaxPythonFrames = 128;

struct CapturedStack {
  // Innermost first. A native return address, or kPythonFrameBit | i where i indexes python[].
  uint64_t frames[kMaxNativeFrames + kMaxPythonFrames];
  int frame_count;
  PythonFrameView python[kMaxPythonFrames];  // .key: the frame's content hash (file, function, line)
  int python_count;
  // The native unwind stopped at its depth (the frames kept, or the unwind's own limit), so native frames past
  // the last one kept may be missing: Stack.native_frames_cut.
  bool native_cut;
  // The thread had more Python frames than kMaxPythonFrames; the outermost are missing: Stack.python_frames_cut.
  bool python_cut;
  // python[] are the frames of the thread waiting in PyTorch's backward, not the calling thread's own (it has
  // none): python_frames_read_backward. Stack.python_frames_from_backward.
  bool python_from_backward;
  uint64_t key;  // content hash of the whole stack and the three flags, 0 when frame_count == 0
};

// Fills `out`. `with_python` reads the thread's Python frames (all of them, up to kMaxPythonFrames); the native
// frames kept are capped at `max_native_with_python` when the thread has Python frames and at `max_native` when
// it has none (0 = none). Frames inside libmemtrace itself are dropped. With `with_python`, a thread without Python
// frames takes those of the thread waiting in PyTorch's backward, if there is one (python_frames_read_backward),
// outermost after its own native frames, and keeps `max_native` of those. `path` names the hook's path to here
// (the event's Api): how many of our own frames to unwind past is learned per path.
void capture_stack(CapturedStack* out, int max_native, int max_native_with_python, bool with_python, uint8_t path);

// Records the address range of libmemtrace's own code (its frames are skipped) and loads libunwind. Call
// at start; a forked child keeps what its parent found. False when libunwind.so.8 cannot be loaded: stacks
// then have Python frames only.
bool stack_capture_init();

// fork() handlers (pthread_atfork's three): prepare waits until no thread is inside an unwind and holds new
// unwinds back (capture_stack waits) until parent or child lets them go. Why: stack_capture.cc.
void stack_capture_fork_prepare();
void stack_capture_fork_parent();
void stack_capture_fork_child();

}  // namespace memtrace
