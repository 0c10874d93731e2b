// Reading the calling thread's own Python frames from inside a hook, without the GIL.
//
// Why this is safe: the thread is blocked inside our hook, so its own frame chain cannot change while we
// read it; we only follow pointers (thread state -> current interpreter frame -> previous ...) and read
// immutable parts of code objects (file name, qualified name, line table). We never create a Python
// object, never take the GIL and never run Python code: PyTorch calls its allocator with the GIL released
// (measured: 0 of 57,853 reports held it) and under its own lock, so taking the GIL could deadlock and
// creating objects could start the garbage collector, which frees tensors and re-enters the allocator.
//
// Structure layouts differ per CPython version. 3.11 and 3.12 use built-in offset tables; 3.13 and later
// read the offsets the interpreter publishes in _PyRuntime (_Py_DebugOffsets). Any other version reports
// kUnsupported and the tracer records native frames only.
#pragma once
#include <cstdint>

namespace memtrace {

enum class PythonSupport {
  kAbsent,       // no CPython in this process (yet)
  kSupported,    // frames can be read
  kUnsupported,  // CPython is here but this version has no frame reader
};

// Detects CPython in the process (dlsym(RTLD_DEFAULT, "Py_Version") and friends). Call it from outside
// any hook (the writer thread does, at start and when new modules appear); idempotent; once it returns
// kSupported or kUnsupported it never changes. `hex_version` receives PY_VERSION_HEX (0 when absent).
PythonSupport python_frames_init(uint32_t* hex_version);

// One frame as read from the interpreter. The strings are NOT NUL-terminated and point into the code
// object's own storage: copy them before the hook returns.
struct PythonFrameView {
  const char* file;
  uint32_t file_len;
  const char* function;  // co_qualname
  uint32_t function_len;
  uint32_t line;         // 1-based source line of the instruction being executed, 0 when unknown
  // True for the outermost Python frame run by one call of the interpreter's evaluation loop
  // (_PyEval_EvalFrameDefault). Used to splice the frames in place of the native loop frames.
  bool ends_eval_call;
};

// Reads the calling thread's Python frames, innermost first, into `out` (at most `capacity`).
// Returns the number written; 0 when the thread has no Python frames or support is not kSupported.
// Never allocates, never locks; safe to call from any hook after python_frames_init returned kSupported.
int python_frames_read(PythonFrameView* out, int capacity);

// True when `pc` (a native return address) lies inside _PyEval_EvalFrameDefault.
bool python_is_eval_pc(uintptr_t pc);

}  // namespace memtrace

namespace memtrace {
// True once the interpreter has begun Py_FinalizeEx (reads _PyRuntime's finalizing state: no GIL, no
// object). False when support is not kSupported.
bool python_is_finalizing();
}  // namespace memtrace
