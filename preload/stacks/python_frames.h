// Reading the calling thread's own Python frames from inside a hook, without the GIL; and, for a thread without
// Python frames, those of the thread waiting in PyTorch's backward (python_frames_read_backward).
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
//
// Backward attribution. PyTorch runs the nodes of a backward pass that compute on a GPU on its autograd device
// threads (one per device, started by PyTorch at the first backward, so possibly before tracing started), which run
// no Python code: their allocations have native frames only. The thread that called backward waits meanwhile.
// python_frames_read_backward finds that thread and reads ITS frames for the allocating thread:
//  - Which thread: walking the interpreter's list of thread states (PyInterpreterState_Head/_Next,
//    PyInterpreterState_ThreadHead, PyThreadState_Next: field reads that take no lock and create nothing; at most
//    kMaxThreadStates of them), the one whose innermost Python frame runs `_engine_run_backward` of a file whose
//    path ends in torch/autograd/graph.py: the function through which Tensor.backward, torch.autograd.backward
//    and torch.autograd.grad all call the C++ engine in PyTorch 2.x (Variable._execution_engine.run_backward is a
//    C method, so no Python frame lies above it while the engine runs). Exactly one such thread, or none is used:
//    with two threads in backward at once the allocating thread's graph is not known.
//  - Why its innermost frame, not any frame: a thread whose innermost frame is that function is inside the C++
//    engine (it released the GIL there and waits until the graph task ends), so its frames cannot change while a
//    worker runs a node of that graph task, and a worker allocates only while running such a node. A thread
//    whose innermost frame is anything else may be running Python, pushing and popping frames while we read: only
//    its thread state and innermost frame (two loads and a type check) are read, never its chain.
//  - Every pointer read is validated as the own-thread reader validates it (code objects by type, strings by
//    type and kind) and every walk is bounded (thread states, interpreters, frames).
//  - What remains racy: a thread state freed by a Python thread exiting at the moment it is visited (CPython
//    unlinks it under its own lock before freeing it; we take no lock). The window is that of one load.
//  - Cost: threads with Python frames never get here. A thread without keeps the chain it borrowed last (3.12+:
//    per frame its address, code object, co_version and instruction; python_frames.cc, borrow cache): while the
//    waiting thread's chain is that one, frame for frame, the views found then are copied, nothing is read again
//    (a backward pass keeps one chain throughout). Otherwise the chain is read through the thread's own walk memo,
//    which decodes only the frames that changed.
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
// kSupported or kUnsupported it never changes. `hex_version` receives PY_VERSION_HEX (0 when absent or
// older than 3.11, which lacks Py_Version).
PythonSupport python_frames_init(uint32_t* hex_version);

// fork() handlers (called from the recorder's): prepare waits for an initialization in progress (another thread
// starting the trace) and holds the lock across fork(), so that the child never inherits it held by a thread it
// does not have and waits on it forever at its own start (e2e_fork_threads' rare hang); the child gets it fresh.
void python_frames_fork_prepare();
void python_frames_fork_parent();
void python_frames_fork_child();

// One frame as read from the interpreter. The strings are NOT NUL-terminated and point into the code
// object's own storage: copy them before the hook returns.
struct PythonFrameView {
  const char* file;
  uint32_t file_len;
  const char* function;  // co_qualname
  uint32_t function_len;
  uint32_t line;  // 1-based source line of the instruction being executed, 0 when unknown
  uint64_t key;   // python_frame_key(file, function, line): equal content gives an equal key
  // True for the outermost Python frame run by one call of the interpreter's evaluation loop
  // (_PyEval_EvalFrameDefault). Used to splice the frames in place of the native loop frames.
  bool ends_eval_call;
};

// Reads the calling thread's Python frames, innermost first, into `out` (at most `capacity`).
// Returns the number written; 0 when the thread has no Python frames or support is not kSupported.
// `*cut` (when not NULL) is set to whether the thread has Python frames beyond those written: it had more
// than `capacity`, and the outermost ones are missing. Looked for only when `capacity` views were written
// (or the walk reached its own limit), so that a read that fits pays nothing for it.
// Never locks; safe to call from any hook after python_frames_init returned kSupported. Allocates nothing,
// except once per thread: the first read that finds Python frames maps the thread's walk memo (one mmap of
// 80 KiB, mostly never touched; registering it for release at thread exit may make glibc calloc 512 bytes).
int python_frames_read(PythonFrameView* out, int capacity, bool* cut = nullptr);

// For a thread without Python frames of its own (python_frames_read returned 0): the Python frames of the one thread
// whose innermost frame is PyTorch's `_engine_run_backward` (torch/autograd/graph.py), read as python_frames_read
// reads them (innermost first, at most `capacity`, `*cut` likewise); 0 when no thread, or more than one, is there,
// or support is not kSupported. Why this is safe, and what it costs: the comment at the top. Never locks; allocates
// only as python_frames_read does (the calling thread's walk memo), and once per thread its borrow cache (one mmap of
// about 16 KiB, released at thread exit).
int python_frames_read_backward(PythonFrameView* out, int capacity, bool* cut = nullptr);

// The number of python_frames_read_backward calls on the calling thread answered from its borrow cache (the waiting
// thread's chain unchanged since its previous read): for tests and benchmarks.
uint64_t python_frames_borrow_reused();

// The most thread states python_frames_read_backward visits (over all interpreters) before giving up.
constexpr int kMaxThreadStates = 64;

// The number of frames the calling thread's reads have resolved (decoded, or found in the shared frame cache)
// since it started, rather than reused from its walk memo of the previous read (python_frames.cc): for tests
// and benchmarks of the memo.
uint64_t python_frames_resolved();

// The content hash of one frame (file, function, line), never 0: the key under which the trace interns a
// Python source position. Frames of different code objects with the same text get the same key.
uint64_t python_frame_key(const char* file, uint32_t file_len, const char* function, uint32_t function_len,
                          uint32_t line);

// True when `pc` (a native return address) lies inside _PyEval_EvalFrameDefault.
bool python_is_eval_pc(uintptr_t pc);

// _PyEval_EvalFrameDefault's machine code as [*begin, *end), for a caller testing many return addresses;
// an empty range when support is not kSupported.
void python_eval_range(uintptr_t* begin, uintptr_t* end);

// Why python_frames_init returned kUnsupported, as one line for the user (for example
// "CPython 3.10 has no frame reader (3.11, 3.12 and 3.13 have one)"); "" otherwise.
const char* python_frames_unsupported_reason();

// True once the interpreter has begun Py_FinalizeEx (reads _PyRuntime's finalizing state: no GIL, no
// object). False when support is not kSupported.
bool python_is_finalizing();

// ---- Layout of the interpreter structures the reader follows (exposed so that tests can check it) ----
// Every field is a byte offset from the start of the named C structure, -1 when this version lacks it.
// 3.11 and 3.12: from the built-in tables, derived with offsetof() from that version's internal headers.
// 3.13: from _Py_DebugOffsets at the start of _PyRuntime, plus the few fields it does not publish.
struct PythonLayout {
  uint32_t minor_version;         // 11 for CPython 3.11 ...
  int32_t tstate_cframe;          // PyThreadState.cframe (3.11, 3.12); -1 on 3.13
  int32_t cframe_current_frame;   // _PyCFrame.current_frame (3.11, 3.12); -1 on 3.13
  int32_t tstate_current_frame;   // PyThreadState.current_frame (3.13); -1 before
  int32_t frame_code;             // _PyInterpreterFrame.f_code (3.11, 3.12) / f_executable (3.13)
  int32_t frame_previous;         // _PyInterpreterFrame.previous
  int32_t frame_instr;            // .prev_instr (3.11, 3.12: last instruction started) / .instr_ptr (3.13)
  int32_t frame_owner;            // .owner, one byte (enum _frameowner)
  int32_t frame_is_entry;         // .is_entry, one byte (3.11 only)
  int32_t owner_generator;        // FRAME_OWNED_BY_GENERATOR
  int32_t owner_cstack;           // FRAME_OWNED_BY_CSTACK (3.12+: the shim frame each eval-loop call pushes)
  int32_t code_filename;          // PyCodeObject.co_filename (str)
  int32_t code_qualname;          // PyCodeObject.co_qualname (str)
  int32_t code_linetable;         // PyCodeObject.co_linetable (bytes, PEP 626/657 location table)
  int32_t code_firstlineno;       // PyCodeObject.co_firstlineno (int)
  int32_t code_firsttraceable;    // PyCodeObject._co_firsttraceable (int, in code units)
  int32_t code_code_adaptive;     // PyCodeObject.co_code_adaptive (first instruction)
  int32_t code_version;           // PyCodeObject.co_version (uint32_t, 3.12+): see python_frames.cc; -1 on 3.11
  int32_t object_type;            // PyObject.ob_type
  int32_t bytes_size;             // PyVarObject.ob_size of a bytes object
  int32_t bytes_data;             // PyBytesObject.ob_sval
  int32_t unicode_length;         // PyASCIIObject.length (code points)
  int32_t unicode_state;          // PyASCIIObject.state (bit field, read as a uint32_t)
  int32_t unicode_ascii_size;     // sizeof(PyASCIIObject): where compact ASCII data starts
  int32_t unicode_utf8_length;    // PyCompactUnicodeObject.utf8_length
  int32_t unicode_utf8;           // PyCompactUnicodeObject.utf8 (cached UTF-8, may be NULL)
  uint32_t unicode_compact_mask;  // state.compact bit within the uint32_t at unicode_state
  uint32_t unicode_ascii_mask;    // state.ascii bit
  int32_t runtime_finalizing;     // _PyRuntimeState._finalizing (PyThreadState*, non-NULL once finalizing)
};

// The source line of the instruction `offset_bytes` bytes after a code object's first instruction, decoded
// from its location table (co_linetable: the PEP 626/657 format of 3.11+, described in CPython's
// Objects/locations.md) of `table_len` bytes, starting from co_firstlineno `first_line`. 0 when the
// instruction has no location or lies past the table; a negative offset (a frame that has not started its
// first instruction) gives `first_line`, as PyCode_Addr2Line does.
uint32_t python_line_from_table(const uint8_t* table, int64_t table_len, int32_t first_line, int64_t offset_bytes);

// The built-in table for CPython 3.`minor` (11 or 12). False for any other version.
bool python_builtin_layout(uint32_t minor, PythonLayout* out);

// The layout read from `runtime` (the address of _PyRuntime) of CPython 3.13, whose first member is
// _Py_DebugOffsets (cookie "xdebugpy", then the PY_VERSION_HEX it was built for). False, with `*why`
// set to a one-line reason, when the cookie, version or build kind does not match.
bool python_layout_from_debug_offsets(const void* runtime, PythonLayout* out, const char** why);
}  // namespace memtrace
