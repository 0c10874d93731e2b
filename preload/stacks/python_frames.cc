// Python frame reader: follows the calling thread's interpreter frames by raw memory reads (see
// python_frames.h for why no Python API may be called). Built into libmemtrace.so without any Python
// header, so that one tracer works with whichever CPython the traced job runs; every structure offset
// comes from a PythonLayout (built-in tables for 3.11/3.12, _Py_DebugOffsets for 3.13).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stacks/python_frames.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "record/tls.h"
#include "stacks/intern_table.h"

namespace memtrace {
namespace {

// Bounds on every walk, so that a corrupt or cyclic chain cannot hang or overrun the hook.
constexpr int kMaxFramesWalked = 1024;           // interpreter frames visited per read, shims included
constexpr uint32_t kMaxStringBytes = 4096;       // longest file or function name returned
constexpr int64_t kMaxLineTableBytes = 1 << 20;  // longest co_linetable decoded
const char kUnknownString[] = "?";

// clang-format off: the layouts are laid out by hand, several fields a line, to compare one with another.
// CPython 3.11 internal headers (3.11.7): offsetof() of each field, checked by tests/python/layout_check.c.
constexpr PythonLayout kLayout311 = {.minor_version = 11,
                                     .tstate_cframe = 56,
                                     .cframe_current_frame = 8,
                                     .tstate_current_frame = -1,
                                     .frame_code = 32,
                                     .frame_previous = 48,
                                     .frame_instr = 56,
                                     .frame_owner = 69,
                                     .frame_is_entry = 68,
                                     .owner_generator = 1,
                                     .owner_cstack = -1,
                                     .code_filename = 112,
                                     .code_qualname = 128,
                                     .code_linetable = 136,
                                     .code_firstlineno = 72,
                                     .code_firsttraceable = 168,
                                     .code_code_adaptive = 184,
                                     .code_version = -1,
                                     .object_type = 8,
                                     .bytes_size = 16,
                                     .bytes_data = 32,
                                     .unicode_length = 16,
                                     .unicode_state = 32,
                                     .unicode_ascii_size = 48,
                                     .unicode_utf8_length = 48,
                                     .unicode_utf8 = 56,
                                     .unicode_compact_mask = 1u << 5,
                                     .unicode_ascii_mask = 1u << 6,
                                     .runtime_finalizing = 24};

// CPython 3.12 internal headers (3.12.1). is_entry is gone: each eval-loop call pushes a shim frame
// owned by the C stack instead.
constexpr PythonLayout kLayout312 = {.minor_version = 12,
                                     .tstate_cframe = 56,
                                     .cframe_current_frame = 0,
                                     .tstate_current_frame = -1,
                                     .frame_code = 0,
                                     .frame_previous = 8,
                                     .frame_instr = 56,
                                     .frame_owner = 70,
                                     .frame_is_entry = -1,
                                     .owner_generator = 1,
                                     .owner_cstack = 3,
                                     .code_filename = 112,
                                     .code_qualname = 128,
                                     .code_linetable = 136,
                                     .code_firstlineno = 68,
                                     .code_firsttraceable = 176,
                                     .code_code_adaptive = 192,
                                     .code_version = 92,
                                     .object_type = 8,
                                     .bytes_size = 16,
                                     .bytes_data = 32,
                                     .unicode_length = 16,
                                     .unicode_state = 32,
                                     .unicode_ascii_size = 40,
                                     .unicode_utf8_length = 40,
                                     .unicode_utf8 = 48,
                                     .unicode_compact_mask = 1u << 5,
                                     .unicode_ascii_mask = 1u << 6,
                                     .runtime_finalizing = 24};
// clang-format on

// Word indices into CPython 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h): a char[8]
// cookie followed only by uint64_t members, so each member is one 8-byte word.
enum DebugOffsetWord313 : int {
  kDoVersion = 1,
  kDoFreeThreaded = 2,
  kDoRuntimeFinalizing = 4,
  kDoThreadCurrentFrame = 23,
  kDoFramePrevious = 29,
  kDoFrameExecutable = 30,
  kDoFrameInstrPtr = 31,
  kDoFrameOwner = 33,
  kDoCodeFilename = 35,
  kDoCodeQualname = 37,
  kDoCodeLinetable = 38,
  kDoCodeFirstlineno = 39,
  kDoCodeAdaptive = 43,
  kDoObjectType = 45,
  kDoBytesSize = 65,
  kDoBytesData = 66,
  kDoUnicodeState = 68,
  kDoUnicodeLength = 69,
  kDoUnicodeAsciiSize = 70,
  kDoWords313 = 73,  // sizeof(_Py_DebugOffsets) / 8 in 3.13.0
};
// 3.13 fields _Py_DebugOffsets does not publish (3.13.0 headers): _co_firsttraceable, co_version.
constexpr int32_t kCodeFirsttraceable313 = 184;
constexpr int32_t kCodeVersion313 = 92;

struct Reader {
  PythonLayout layout;
  uintptr_t runtime;       // &_PyRuntime
  void* (*get_tstate)();   // PyGILState_GetThisThreadState: a thread-local read, NULL without Python
  uintptr_t code_type;     // &PyCode_Type
  uintptr_t unicode_type;  // &PyUnicode_Type
  uintptr_t bytes_type;    // &PyBytes_Type
  uintptr_t eval_begin;    // [eval_begin, eval_end) = _PyEval_EvalFrameDefault's machine code
  uintptr_t eval_end;
  // The thread-state list's accessors (plain field reads in 3.11-3.13, Python/pystate.c): NULL when one is missing,
  // and then python_frames_read_backward finds no thread.
  void* (*interp_head)();       // PyInterpreterState_Head
  void* (*interp_next)(void*);  // PyInterpreterState_Next
  void* (*thread_head)(void*);  // PyInterpreterState_ThreadHead
  void* (*thread_next)(void*);  // PyThreadState_Next
};

Reader g_reader;
std::atomic<int> g_support{static_cast<int>(PythonSupport::kAbsent)};
pthread_mutex_t g_init_mutex = PTHREAD_MUTEX_INITIALIZER;
char g_unsupported_reason[200];

bool supported() { return g_support.load(std::memory_order_acquire) == static_cast<int>(PythonSupport::kSupported); }

// ---- raw reads: never through NULL, never with a missing offset ----
template <class T>
bool read_at(uintptr_t base, int32_t offset, T* out) {
  if (base == 0 || offset < 0) return false;
  memcpy(out, reinterpret_cast<const void*>(base + static_cast<uintptr_t>(offset)), sizeof(T));
  return true;
}

// For a base known to be non-NULL and a field every supported version has (the frame walk's hot path).
template <class T>
T load(uintptr_t base, int32_t offset) {
  T value;
  memcpy(&value, reinterpret_cast<const void*>(base + static_cast<uintptr_t>(offset)), sizeof(T));
  return value;
}

uintptr_t read_pointer(uintptr_t base, int32_t offset) {
  uintptr_t value = 0;
  return read_at(base, offset, &value) ? value : 0;
}

bool has_type(uintptr_t object, uintptr_t type) {
  return object != 0 && read_pointer(object, g_reader.layout.object_type) == type;
}

// A str's text without creating anything: compact ASCII strings keep it right after the header;
// compact non-ASCII ones may have a cached UTF-8 copy. Anything else reads as "?".
void read_string(uintptr_t object, const char** text, uint32_t* text_len) {
  const PythonLayout& l = g_reader.layout;
  *text = kUnknownString;
  *text_len = 1;
  uint32_t state = 0;
  if (!has_type(object, g_reader.unicode_type) || !read_at(object, l.unicode_state, &state)) return;
  if ((state & l.unicode_compact_mask) == 0) return;
  int64_t length = 0;
  const char* data = nullptr;
  if (state & l.unicode_ascii_mask) {
    if (!read_at(object, l.unicode_length, &length)) return;
    data = reinterpret_cast<const char*>(object + static_cast<uintptr_t>(l.unicode_ascii_size));
  } else {
    data = reinterpret_cast<const char*>(read_pointer(object, l.unicode_utf8));
    if (data == nullptr || !read_at(object, l.unicode_utf8_length, &length)) return;
  }
  if (length < 0) return;
  *text = data;
  *text_len = length > kMaxStringBytes ? kMaxStringBytes : static_cast<uint32_t>(length);
}

// ---- location table (PEP 626/657 format of 3.11+, Objects/locations.md in CPython) ----
// Each entry: one byte 1cccclll (code c, covering l+1 code units of 2 bytes), then code-specific varints.
// Codes 0-9: short form, same line; 10-12: one-line form, line delta c-10; 13: no columns, signed-varint
// line delta; 14: long form, signed-varint line delta first; 15: no location.
struct TableCursor {
  const uint8_t* p;
  const uint8_t* end;
};

uint32_t read_varint(TableCursor* c) {
  if (c->p >= c->end) return 0;
  uint8_t byte = *c->p++;
  uint32_t value = byte & 63;
  unsigned shift = 0;
  while ((byte & 64) && c->p < c->end && shift < 30) {
    byte = *c->p++;
    shift += 6;
    value |= static_cast<uint32_t>(byte & 63) << shift;
  }
  return value;
}

int32_t read_signed_varint(TableCursor* c) {
  uint32_t value = read_varint(c);
  return (value & 1) ? -static_cast<int32_t>(value >> 1) : static_cast<int32_t>(value >> 1);
}

// ---- the writer's half of the caches' per-entry sequence numbers (a seqlock) ----
// Takes the entry for writing: false when another writer holds it (odd number) or took it first, and the
// caller then skips the store; a cache entry is only an optimisation. The fence orders the odd number
// before the field stores, so a reader that sees any new field also sees the entry as being written.
inline bool begin_entry_write(std::atomic<uint32_t>& entry_sequence, uint32_t* sequence) {
  *sequence = entry_sequence.load(std::memory_order_relaxed);
  if ((*sequence & 1) || !entry_sequence.compare_exchange_strong(*sequence, *sequence + 1, std::memory_order_acquire)) {
    return false;
  }
  std::atomic_thread_fence(std::memory_order_release);
  return true;
}

// Publishes the fields stored since begin_entry_write: the next even number, after them.
inline void end_entry_write(std::atomic<uint32_t>& entry_sequence, uint32_t sequence) {
  entry_sequence.store(sequence + 2, std::memory_order_release);
}

// ---- line cache: (code object, line table, offset) -> line, lock-free, fixed size ----
// A per-entry sequence number makes a reader drop an entry that a writer is changing; a writer skips an
// entry another writer holds. The line table pointer guards against a freed code object whose address
// has been reused by another.
struct LineCacheEntry {
  std::atomic<uint32_t> sequence;
  std::atomic<uintptr_t> code;
  std::atomic<uintptr_t> line_table;
  std::atomic<uint64_t> offset_and_line;  // offset_bytes << 32 | line
};
constexpr size_t kLineCacheEntries = 4096;
LineCacheEntry g_line_cache[kLineCacheEntries];

LineCacheEntry& cache_slot(uintptr_t code, uint32_t offset_bytes) {
  uint64_t h = (static_cast<uint64_t>(code) >> 4) * 0x9E3779B97F4A7C15ull ^ offset_bytes * 0xC2B2AE3D27D4EB4Full;
  return g_line_cache[(h >> 40) % kLineCacheEntries];
}

bool cache_lookup(uintptr_t code, uintptr_t line_table, uint32_t offset_bytes, uint32_t* line) {
  LineCacheEntry& e = cache_slot(code, offset_bytes);
  uint32_t before = e.sequence.load(std::memory_order_acquire);
  if (before & 1) return false;
  uintptr_t cached_code = e.code.load(std::memory_order_relaxed);
  uintptr_t cached_table = e.line_table.load(std::memory_order_relaxed);
  uint64_t packed = e.offset_and_line.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.sequence.load(std::memory_order_relaxed) != before) return false;
  if (cached_code != code || cached_table != line_table || (packed >> 32) != offset_bytes) return false;
  *line = static_cast<uint32_t>(packed);
  return true;
}

void cache_store(uintptr_t code, uintptr_t line_table, uint32_t offset_bytes, uint32_t line) {
  LineCacheEntry& e = cache_slot(code, offset_bytes);
  uint32_t sequence;
  if (!begin_entry_write(e.sequence, &sequence)) return;
  e.code.store(code, std::memory_order_relaxed);
  e.line_table.store(line_table, std::memory_order_relaxed);
  e.offset_and_line.store(static_cast<uint64_t>(offset_bytes) << 32 | line, std::memory_order_relaxed);
  end_entry_write(e.sequence, sequence);
}

uint32_t line_of(uintptr_t code, int64_t offset_bytes) {
  const PythonLayout& l = g_reader.layout;
  int32_t first_line = 0;
  read_at(code, l.code_firstlineno, &first_line);
  if (offset_bytes < 0 || offset_bytes > UINT32_MAX) return python_line_from_table(nullptr, 0, first_line, -1);
  uintptr_t table = read_pointer(code, l.code_linetable);
  if (!has_type(table, g_reader.bytes_type)) return 0;
  uint32_t offset32 = static_cast<uint32_t>(offset_bytes);
  uint32_t line = 0;
  if (cache_lookup(code, table, offset32, &line)) return line;
  int64_t table_len = 0;
  if (!read_at(table, l.bytes_size, &table_len) || table_len < 0 || table_len > kMaxLineTableBytes) return 0;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(table + static_cast<uintptr_t>(l.bytes_data));
  line = python_line_from_table(bytes, table_len, first_line, offset_bytes);
  cache_store(code, table, offset32, line);
  return line;
}

// ---- frame cache: (code object, instruction offset) -> the frame's view, lock-free, fixed size ----
// A hook reads the same few code objects at the same few offsets again and again; decoding names, the line
// and the content key each time cost more than the native unwind (measured with bench/hot_path). An entry
// is used only when the code object has the same co_version (3.12+: it is the object the entry was made
// from, not another allocated where a freed one was) and still points at the same line table, file name and
// qualified name objects, whose lengths are unchanged: then those objects are the live ones the code object
// holds, and the cached text pointers (compact ASCII only: the text lies inside the object itself) point into
// them.
struct FrameCacheEntry {
  std::atomic<uint32_t> sequence;  // odd while a writer fills the entry
  std::atomic<uintptr_t> code;
  std::atomic<uintptr_t> line_table;
  std::atomic<uintptr_t> filename;
  std::atomic<uintptr_t> qualname;
  std::atomic<uint64_t> offset_and_line;         // offset_bytes << 32 | line
  std::atomic<uint64_t> lengths;                 // file_len << 32 | function_len
  std::atomic<uint64_t> key;                     // content hash of (file, function, line); see PythonFrameView::key
  std::atomic<uint32_t> before_first_traceable;  // 1: offset before _co_firsttraceable (is_incomplete)
  std::atomic<uint32_t> code_version;            // code_version_of(code) when stored
};
constexpr size_t kFrameCacheEntries = 4096;
FrameCacheEntry g_frame_cache[kFrameCacheEntries];

FrameCacheEntry& frame_slot(uintptr_t code, uint32_t offset_bytes) {
  uint64_t h = (static_cast<uint64_t>(code) >> 4) * 0x9E3779B97F4A7C15ull ^ offset_bytes * 0xC2B2AE3D27D4EB4Full;
  return g_frame_cache[(h >> 40) % kFrameCacheEntries];
}

// The code object's line table, file name and qualified name objects: what an entry is checked against.
struct CodeRefs {
  uintptr_t line_table;
  uintptr_t filename;
  uintptr_t qualname;
};

// `code` is a code object (never NULL); every supported version has the three fields.
CodeRefs code_refs(uintptr_t code) {
  const PythonLayout& l = g_reader.layout;
  return {load<uintptr_t>(code, l.code_linetable), load<uintptr_t>(code, l.code_filename),
          load<uintptr_t>(code, l.code_qualname)};
}

// co_version of the code object `code` (3.12+), 0 where the layout has none. CPython gives each code object it
// creates the next value of one counter (never reused; 0 once the counter has run out: Objects/codeobject.c,
// init_code), so a nonzero value tells a code object from one freed before it at the same address.
uint32_t code_version_of(uintptr_t code) {
  const int32_t offset = g_reader.layout.code_version;
  return offset >= 0 ? load<uint32_t>(code, offset) : 0;
}

int64_t ascii_length(uintptr_t object) {
  int64_t length = -1;
  read_at(object, g_reader.layout.unicode_length, &length);
  return length;
}

// Fills `view` (all but ends_eval_call) from the cache; false on a miss.
bool frame_cache_lookup(uintptr_t code, uint32_t offset_bytes, PythonFrameView* view, bool* before_first_traceable) {
  FrameCacheEntry& e = frame_slot(code, offset_bytes);
  uint32_t before = e.sequence.load(std::memory_order_acquire);
  if (before & 1) return false;
  uintptr_t cached_code = e.code.load(std::memory_order_relaxed);
  uint64_t packed = e.offset_and_line.load(std::memory_order_relaxed);
  CodeRefs cached{e.line_table.load(std::memory_order_relaxed), e.filename.load(std::memory_order_relaxed),
                  e.qualname.load(std::memory_order_relaxed)};
  uint64_t lengths = e.lengths.load(std::memory_order_relaxed);
  uint64_t key = e.key.load(std::memory_order_relaxed);
  uint32_t cached_before = e.before_first_traceable.load(std::memory_order_relaxed);
  uint32_t cached_version = e.code_version.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.sequence.load(std::memory_order_relaxed) != before) return false;
  if (cached_code != code || (packed >> 32) != offset_bytes || cached_version != code_version_of(code)) return false;
  CodeRefs now = code_refs(code);
  if (now.line_table != cached.line_table || now.filename != cached.filename || now.qualname != cached.qualname)
    return false;
  uint32_t file_len = static_cast<uint32_t>(lengths >> 32), function_len = static_cast<uint32_t>(lengths);
  if (ascii_length(now.filename) != file_len || ascii_length(now.qualname) != function_len) return false;
  const uintptr_t text_offset = static_cast<uintptr_t>(g_reader.layout.unicode_ascii_size);
  view->file = reinterpret_cast<const char*>(now.filename + text_offset);
  view->file_len = file_len;
  view->function = reinterpret_cast<const char*>(now.qualname + text_offset);
  view->function_len = function_len;
  view->line = static_cast<uint32_t>(packed);
  view->key = key;
  *before_first_traceable = cached_before != 0;
  return true;
}

// True when both names of a view read the slow way are compact ASCII strings no longer than the cap: their
// text lies inside the str objects `refs` names, so a later check of those objects vouches for it.
bool names_inside_objects(const CodeRefs& refs, const PythonFrameView& view) {
  const uintptr_t text_offset = static_cast<uintptr_t>(g_reader.layout.unicode_ascii_size);
  return reinterpret_cast<uintptr_t>(view.file) == refs.filename + text_offset &&
         reinterpret_cast<uintptr_t>(view.function) == refs.qualname + text_offset &&
         ascii_length(refs.filename) == view.file_len && ascii_length(refs.qualname) == view.function_len;
}

// Stores a view read the slow way whose names_inside_objects().
void frame_cache_store(uintptr_t code, uint32_t offset_bytes, const CodeRefs& refs, const PythonFrameView& view,
                       bool before_first_traceable) {
  FrameCacheEntry& e = frame_slot(code, offset_bytes);
  uint32_t sequence;
  if (!begin_entry_write(e.sequence, &sequence)) return;
  e.code.store(code, std::memory_order_relaxed);
  e.line_table.store(refs.line_table, std::memory_order_relaxed);
  e.filename.store(refs.filename, std::memory_order_relaxed);
  e.qualname.store(refs.qualname, std::memory_order_relaxed);
  e.offset_and_line.store(static_cast<uint64_t>(offset_bytes) << 32 | view.line, std::memory_order_relaxed);
  e.lengths.store(static_cast<uint64_t>(view.file_len) << 32 | view.function_len, std::memory_order_relaxed);
  e.key.store(view.key, std::memory_order_relaxed);
  e.before_first_traceable.store(before_first_traceable ? 1 : 0, std::memory_order_relaxed);
  e.code_version.store(code_version_of(code), std::memory_order_relaxed);
  end_entry_write(e.sequence, sequence);
}

// ---- frame walk ----
uintptr_t current_frame(uintptr_t tstate) {
  const PythonLayout& l = g_reader.layout;
  if (l.tstate_cframe >= 0) return read_pointer(read_pointer(tstate, l.tstate_cframe), l.cframe_current_frame);
  return read_pointer(tstate, l.tstate_current_frame);
}

// A frame whose function has not yet run its first traceable instruction (arguments still being set
// up); CPython's own tracebacks skip these too (_PyFrame_IsIncomplete).
bool is_incomplete(uintptr_t code, int8_t owner, int64_t offset_bytes) {
  const PythonLayout& l = g_reader.layout;
  int32_t first_traceable = 0;
  if (owner == l.owner_generator || !read_at(code, l.code_firsttraceable, &first_traceable)) return false;
  return offset_bytes < static_cast<int64_t>(first_traceable) * 2;
}

// Fills `view` (all but ends_eval_call) for the code object `code` at `offset_bytes`, through the frame cache
// when it can. True when the view's names are compact ASCII text inside the objects `refs` names (then it can
// be remembered and checked later like a frame cache entry).
bool resolve_frame(uintptr_t code, int64_t offset_bytes, PythonFrameView* view, bool* before_first_traceable,
                   CodeRefs* refs) {
  bool cacheable = offset_bytes >= 0 && offset_bytes <= UINT32_MAX;
  uint32_t offset32 = static_cast<uint32_t>(offset_bytes);
  if (cacheable && frame_cache_lookup(code, offset32, view, before_first_traceable)) {
    *refs = code_refs(code);
    return true;
  }
  // Whether the offset lies before the first traceable instruction: a property of (code, offset) alone;
  // a generator's frame there is complete all the same.
  *before_first_traceable = is_incomplete(code, /*owner=*/-1, offset_bytes);
  *refs = code_refs(code);
  read_string(refs->filename, &view->file, &view->file_len);
  read_string(refs->qualname, &view->function, &view->function_len);
  view->line = line_of(code, offset_bytes);
  view->key = python_frame_key(view->file, view->file_len, view->function, view->function_len, view->line);
  if (!cacheable || !names_inside_objects(*refs, *view)) return false;
  frame_cache_store(code, offset32, *refs, *view, *before_first_traceable);
  return true;
}

// ---- walk memo: each thread's previous walk, by depth from the bottom of its frame chain ----
// Between two allocations a thread's outer frames rarely change: a training loop allocates again and again
// under the same 20 to 60 Python frames, and only the innermost few differ. Each thread remembers, for every
// depth counted from the bottom of its chain (the outermost frame is depth 0), the frame it walked there as
// (frame address, code object, instruction pointer) and what resolving it gave. A frame at the same depth with
// the same triple reuses that result after the checks below, at the price of a few loads and no hashing,
// atomics or shared cache lines; the others are resolved through the frame cache as before and remembered in
// their place.
//
// Why a reused result is the right one:
//  - The result (file, function, line, key, whether the offset precedes the first traceable instruction)
//    depends only on the code object and the instruction offset, never on the frame: the triple's code and
//    instruction pointer fix both (the offset is the pointer minus the code's first instruction). A frame
//    address reused by another call (a loop calling the same function again from the same place) therefore
//    gives the same result and may reuse it; a reused address with another code object or instruction does
//    not match the triple. The address is in the triple only to tie an entry to the walk that made it.
//  - A frame on the chain holds a reference to its code object, so the code object is alive while we read
//    it, and the fields the result is made of (co_filename, co_qualname, co_linetable, co_firstlineno,
//    _co_firsttraceable) are set when it is created; str and bytes objects are immutable. What remains is a
//    code object freed since the result was remembered and another allocated at its address. On 3.12+ its
//    co_version tells them apart exactly (code_version_of; 3.13 counts per interpreter, so only code objects
//    of two subinterpreters run by one thread could share a value, and then the three objects below must
//    also be where the old ones were). On 3.11, which has none, the entry is checked as the frame cache
//    checks its own: same line table, file name and qualified name objects, lengths unchanged; a code object
//    replaced together with those three objects at the same addresses, with names of the same lengths, is
//    not told apart there (nor by the frame cache). In every case the code object must still point at the
//    same three objects, so the text handed out lies inside objects the live code object holds at that
//    moment. The memo is therefore never weaker than the frame cache it bypasses, and on 3.12+ exact.
//  - Only results whose names are compact ASCII text inside those objects are remembered (as in the frame
//    cache); a frame whose result cannot be is resolved on every walk.
//  - Thread teardown: the memo is one mapping per thread, made at the thread's first walk that finds Python
//    frames and unmapped by a pthread key destructor when the thread exits (the library is never unloaded:
//    -z nodelete); after that, and in a thread that could not get one, the walk goes without. Its entries
//    hold addresses only, never a reference, so nothing is kept alive or freed through them.
//  - Signals: a walk that interrupts another on the same thread (a hook in a signal handler) finds the memo
//    busy and goes without it, so a half-written entry is never read, nor written by two walks at once.
//  - fork: the child's one thread keeps its memo (the same memory, the same frames, the same objects); the
//    other threads' memos stay mapped and unused in the child, like the rest of those threads' memory.
struct WalkMemoEntry {
  uintptr_t frame;  // the triple walked at this depth; frame 0: nothing remembered
  uintptr_t code;
  uintptr_t instr;
  CodeRefs refs;          // what the code object pointed at when the result was made
  uint32_t code_version;  // code_version_of(code) then; 0 on 3.11 (then the lengths are checked)
  uint32_t file_len;
  uint32_t function_len;
  uint32_t line;
  uint64_t key;
  bool before_first_traceable;
};
// One entry per depth a walk can reach (shims included), so that the walk needs no bound check: 80 KiB of
// address space a thread, of which only the pages of the depths its stacks reach are ever touched (two for
// a 100-frame stack).
struct WalkMemo {
  WalkMemoEntry entries[kMaxFramesWalked];
};
static_assert(sizeof(WalkMemo) == 80 * 1024, "the size python_frames.h states");
WalkMemo* const kNoWalkMemo = reinterpret_cast<WalkMemo*>(uintptr_t{1});

MEMTRACE_TLS WalkMemo* t_walk_memo;  // nullptr until the thread's first walk; kNoWalkMemo: none
MEMTRACE_TLS bool t_walk_memo_busy;
MEMTRACE_TLS uint64_t t_frames_resolved;  // python_frames_resolved()
pthread_key_t g_walk_memo_key;
bool g_walk_memo_key_made = false;  // set once, by python_frames_init, before any read is supported

void release_walk_memo(void* memo) {
  munmap(memo, sizeof(WalkMemo));
  t_walk_memo = kNoWalkMemo;
}

// The calling thread's memo, made on its first call; nullptr when it has none.
WalkMemo* thread_walk_memo() {
  WalkMemo* memo = t_walk_memo;
  if (memo != nullptr) return memo == kNoWalkMemo ? nullptr : memo;
  t_walk_memo = kNoWalkMemo;
  if (!g_walk_memo_key_made) return nullptr;
  void* p = mmap(nullptr, sizeof(WalkMemo), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (pthread_setspecific(g_walk_memo_key, p) != 0) {
    munmap(p, sizeof(WalkMemo));
    return nullptr;
  }
  t_walk_memo = static_cast<WalkMemo*>(p);
  return t_walk_memo;
}

void walk_memo_store(WalkMemoEntry* m, uintptr_t frame, uintptr_t code, uintptr_t instr, const CodeRefs& refs,
                     const PythonFrameView& view, bool before_first_traceable) {
  *m = WalkMemoEntry{frame,
                     code,
                     instr,
                     refs,
                     code_version_of(code),
                     view.file_len,
                     view.function_len,
                     view.line,
                     view.key,
                     before_first_traceable};
}

// Resolves the frame `frame` of `code` at `instr` into `view` (all but ends_eval_call) and remembers the result
// in `m` (when not NULL); returns whether the instruction precedes the first traceable one. Out of line: the
// walk's loop stays small for the case it is made for, a memo hit.
__attribute__((noinline)) bool resolve_and_remember(WalkMemoEntry* m, uintptr_t frame, uintptr_t code, uintptr_t instr,
                                                    PythonFrameView* view) {
  ++t_frames_resolved;
  int64_t offset_bytes =
      static_cast<int64_t>(instr - (code + static_cast<uintptr_t>(g_reader.layout.code_code_adaptive)));
  CodeRefs refs;
  bool before_first_traceable = false;
  bool rememberable = resolve_frame(code, offset_bytes, view, &before_first_traceable, &refs);
  if (m != nullptr) {
    if (rememberable) walk_memo_store(m, frame, code, instr, refs, *view, before_first_traceable);
    else m->frame = 0;
  }
  return before_first_traceable;
}

// ---- the walk ----
// The walk is compiled once per layout with fixed offsets (3.11 and 3.12, whose tables are built in) and once
// with the offsets read at run time (3.13): with constant offsets each field is one load, and the loop's
// state stays in registers (a quarter fewer instructions per walk: bench/hot_path_callgrind).
struct Layout311 {
  static constexpr const PythonLayout& get() { return kLayout311; }
};
struct Layout312 {
  static constexpr const PythonLayout& get() { return kLayout312; }
};
struct LayoutAtRunTime {
  static const PythonLayout& get() { return g_reader.layout; }
};

// The number of frames on the chain from `frame` to its bottom, shims included; -1 past kMaxFramesWalked.
template <class L>
int chain_depth(uintptr_t frame) {
  const int32_t previous = L::get().frame_previous;
  int depth = 0;
  for (; frame != 0; frame = load<uintptr_t>(frame, previous)) {
    if (++depth > kMaxFramesWalked) return -1;
  }
  return depth;
}

// Whether `m`, remembered for the same triple, still holds for the code object `code` (see the walk memo's
// comment): the same line table, file name and qualified name objects, and the same co_version (3.12+) or,
// without one, the same name lengths.
template <class L>
bool walk_memo_holds(const WalkMemoEntry& m, uintptr_t code) {
  const PythonLayout& l = L::get();
  if (load<uintptr_t>(code, l.code_linetable) != m.refs.line_table ||
      load<uintptr_t>(code, l.code_filename) != m.refs.filename ||
      load<uintptr_t>(code, l.code_qualname) != m.refs.qualname)
    return false;
  if (l.code_version >= 0 && m.code_version != 0) return load<uint32_t>(code, l.code_version) == m.code_version;
  // m.refs were str objects when remembered, and are the same pointers now.
  return load<int64_t>(m.refs.filename, l.unicode_length) == m.file_len &&
         load<int64_t>(m.refs.qualname, l.unicode_length) == m.function_len;
}

// Whether the chain from `frame` on (the walk has visited `walked` frames before it) holds a frame the walk would
// write: a code object's frame that has begun its first traceable instruction, or a generator's. A chain that
// goes on past kMaxFramesWalked counts as one that does. Called only once the walk's output is full: out of
// line, and with the run-time layout (the fixed-offset walk need not carry it).
__attribute__((noinline)) bool more_frames_to_write(uintptr_t frame, int walked) {
  const PythonLayout& l = g_reader.layout;
  for (; frame != 0 && walked < kMaxFramesWalked; frame = load<uintptr_t>(frame, l.frame_previous), ++walked) {
    const int8_t owner = load<int8_t>(frame, l.frame_owner);
    if (l.owner_cstack >= 0 && owner == l.owner_cstack) continue;
    const uintptr_t code = load<uintptr_t>(frame, l.frame_code);
    if (code == 0 || load<uintptr_t>(code, l.object_type) != g_reader.code_type) continue;
    const int64_t offset_bytes = static_cast<int64_t>(load<uintptr_t>(frame, l.frame_instr) -
                                                      (code + static_cast<uintptr_t>(l.code_code_adaptive)));
    if (!is_incomplete(code, owner, offset_bytes)) return true;
  }
  return frame != 0;
}

// Walks from `frame` (not NULL) to the bottom of its chain, writing at most `capacity` views into `out`,
// innermost first. With a memo, `memo` holds the entries of the chain's `depth` positions. `*cut` (when not
// NULL): whether frames beyond those written remain (python_frames_read).
template <class L, bool kWithMemo>
int walk_frames(uintptr_t frame, PythonFrameView* out, int capacity, WalkMemoEntry* memo, int depth, bool* cut) {
  const PythonLayout& l = L::get();
  const int32_t previous = l.frame_previous, frame_owner = l.frame_owner, frame_code = l.frame_code,
                frame_instr = l.frame_instr, frame_is_entry = l.frame_is_entry, object_type = l.object_type;
  const int32_t owner_cstack = l.owner_cstack, owner_generator = l.owner_generator;
  const uintptr_t text_offset = static_cast<uintptr_t>(l.unicode_ascii_size);
  const uintptr_t code_type = g_reader.code_type;
  PythonFrameView* view = out;  // the next view to write
  PythonFrameView* const out_end = out + capacity;
  // The view written at the previous step of the walk; a C-stack shim right after it means it was the first
  // frame its eval-loop call ran (3.12+).
  PythonFrameView* just_written = nullptr;
  int walked = 0;
  int position = depth - 1;  // of `frame` in the memo: from the bottom of the chain
  // frame_previous, frame_owner, frame_code, frame_instr and object_type exist in every supported layout,
  // and `frame` is non-NULL inside the loop: plain loads (the checked reads cost a sixth of the walk).
  for (; frame != 0 && walked < kMaxFramesWalked; frame = load<uintptr_t>(frame, previous), ++walked, --position) {
    int8_t owner = load<int8_t>(frame, frame_owner);
    if (owner_cstack >= 0 && owner == owner_cstack) {
      if (just_written) just_written->ends_eval_call = true;
      just_written = nullptr;
      continue;
    }
    if (view == out_end) break;
    just_written = nullptr;
    uintptr_t code = load<uintptr_t>(frame, frame_code);
    if (code == 0 || load<uintptr_t>(code, object_type) != code_type) continue;
    uintptr_t instr = load<uintptr_t>(frame, frame_instr);
    bool before_first_traceable;
    WalkMemoEntry* m = kWithMemo ? &memo[position] : nullptr;
    if (kWithMemo && m->frame == frame && m->code == code && m->instr == instr && walk_memo_holds<L>(*m, code)) {
      view->file = reinterpret_cast<const char*>(m->refs.filename + text_offset);
      view->file_len = m->file_len;
      view->function = reinterpret_cast<const char*>(m->refs.qualname + text_offset);
      view->function_len = m->function_len;
      view->line = m->line;
      view->key = m->key;
      before_first_traceable = m->before_first_traceable;
    } else {
      before_first_traceable = resolve_and_remember(m, frame, code, instr, view);
    }
    if (before_first_traceable && owner != owner_generator) continue;
    view->ends_eval_call = frame_is_entry >= 0 && load<uint8_t>(frame, frame_is_entry) != 0;
    just_written = view++;
  }
  // The bottom of the chain ends the outermost eval-loop call.
  if (frame == 0 && just_written) just_written->ends_eval_call = true;
  // Stopped with frames left (output full, or the walk's limit): whether any of them would have been written.
  if (cut) *cut = frame != 0 && more_frames_to_write(frame, walked);
  return static_cast<int>(view - out);
}

template <class L>
int read_frames(uintptr_t frame, PythonFrameView* out, int capacity, bool* cut) {
  WalkMemo* memo = t_walk_memo_busy ? nullptr : thread_walk_memo();
  int depth = memo ? chain_depth<L>(frame) : -1;  // memo positions count from the bottom: the chain's length
  if (depth < 0) return walk_frames<L, false>(frame, out, capacity, nullptr, 0, cut);
  t_walk_memo_busy = true;
  int written = walk_frames<L, true>(frame, out, capacity, memo->entries, depth, cut);
  t_walk_memo_busy = false;
  return written;
}

using ReadFramesFn = int (*)(uintptr_t, PythonFrameView*, int, bool*);
ReadFramesFn g_read_frames = nullptr;  // set with g_reader, before support is published

// ---- the thread waiting in backward (python_frames.h: Backward attribution) ----
constexpr char kBackwardFunction[] = "_engine_run_backward";
constexpr char kBackwardFileSuffix[] = "torch/autograd/graph.py";
constexpr int kMaxInterpreters = 64;
constexpr int kMaxShimsSkipped = 4;  // C-stack shim frames above a thread's innermost Python frame (3.12+)

// Whether the str object `object` holds exactly `text` (n bytes), or ends with it when `suffix`.
bool str_matches(uintptr_t object, const char* text, uint32_t n, bool suffix) {
  const char* data = nullptr;
  uint32_t length = 0;
  read_string(object, &data, &length);
  if (length < n || (!suffix && length != n)) return false;
  return memcmp(data + (length - n), text, n) == 0;
}

// The code object last found to be PyTorch's backward entry point by this thread, and its co_version (3.12+): the
// same object again (same address and co_version) needs no name comparison.
MEMTRACE_TLS uintptr_t t_backward_code;
MEMTRACE_TLS uint32_t t_backward_code_version;

// The innermost Python frame of the thread state `tstate` when it runs PyTorch's backward entry point; 0 otherwise.
// Reads the thread state and that one frame only (the thread may be running Python: python_frames.h).
uintptr_t backward_frame_of(uintptr_t tstate) {
  const PythonLayout& l = g_reader.layout;
  uintptr_t frame = current_frame(tstate);
  int8_t owner = 0;
  for (int skipped = 0; frame != 0 && read_at(frame, l.frame_owner, &owner) && l.owner_cstack >= 0 &&
                        owner == l.owner_cstack && skipped < kMaxShimsSkipped;
       ++skipped)
    frame = read_pointer(frame, l.frame_previous);
  if (frame == 0) return 0;
  const uintptr_t code = read_pointer(frame, l.frame_code);
  if (!has_type(code, g_reader.code_type)) return 0;
  const uint32_t version = code_version_of(code);
  if (code == t_backward_code && version != 0 && version == t_backward_code_version) return frame;
  if (!str_matches(read_pointer(code, l.code_qualname), kBackwardFunction, sizeof kBackwardFunction - 1, false))
    return 0;
  if (!str_matches(read_pointer(code, l.code_filename), kBackwardFileSuffix, sizeof kBackwardFileSuffix - 1, true))
    return 0;
  t_backward_code = code;
  t_backward_code_version = version;
  return frame;
}

// The innermost frame of the one thread (of every interpreter, kMaxThreadStates at most) that backward_frame_of
// finds; 0 when none does, or more than one. (First visited wins past kMaxThreadStates: threads beyond are not seen.)
uintptr_t find_backward_frame();

// ---- borrow cache: a thread's previous read of the waiting thread's chain, reused while that chain is unchanged ----
// Within one backward pass the waiting thread is blocked and its chain does not change, while its worker allocates
// again and again: the walk memo would re-read every frame (a few loads and checks each, ~70 instructions a frame
// with the views written). The cache keeps, per calling thread, the chain it read last -- per frame the address, the
// code object and its co_version, the instruction pointer -- and the views that read gave. A read whose chain
// matches frame for frame, to the same end, copies the views.
// Why the whole chain and not the innermost frame alone: a backward called from two lines of one function has its
// innermost frame at the same address running the same instruction both times, only an outer frame differs.
// Why the views are still valid: every code object on the chain is alive (a frame holds a reference to it) and is the
// object the views were made from (same address and co_version: CPython numbers each code object it creates,
// Objects/codeobject.c), whose file and qualified name objects are immutable and held by it. co_version exists in
// 3.12 and 3.13; on 3.11 there is no cache and the walk memo alone serves.
// Memory: one mapping per thread, made at its first borrowed read, released at thread exit (as the walk memo).
constexpr int kBorrowCacheChain = 256;  // frames (shims included) of the longest chain remembered
constexpr int kBorrowCacheViews = 128;  // kMaxPythonFrames (stacks/stack_capture.h)
struct BorrowChainEntry {
  uintptr_t frame;
  uintptr_t code;
  uintptr_t instr;
  uint32_t code_version;  // 0 when `code` was not a code object
  bool is_code;
};
struct BorrowCache {
  int depth;     // entries of chain[] in use, innermost first; 0: nothing remembered
  int capacity;  // the capacity of the read that made it
  int count;     // views written
  bool cut;
  BorrowChainEntry chain[kBorrowCacheChain];
  PythonFrameView views[kBorrowCacheViews];
};
using BorrowHoldsFn = bool (*)(const BorrowCache&, uintptr_t);
BorrowHoldsFn g_borrow_cache_holds = nullptr;  // set with g_reader where the layout has co_version, else NULL

BorrowCache* const kNoBorrowCache = reinterpret_cast<BorrowCache*>(uintptr_t{1});
MEMTRACE_TLS BorrowCache* t_borrow_cache;  // nullptr until the thread's first borrowed read; kNoBorrowCache: none
MEMTRACE_TLS bool t_borrow_cache_busy;     // a read in progress (a hook in a signal handler goes without)
MEMTRACE_TLS uint64_t t_borrow_reused;     // python_frames_borrow_reused()
pthread_key_t g_borrow_cache_key;
bool g_borrow_cache_key_made = false;  // set once, by python_frames_init

void release_borrow_cache(void* cache) {
  munmap(cache, sizeof(BorrowCache));
  t_borrow_cache = kNoBorrowCache;
}

// The calling thread's cache, made on its first call; nullptr where the layout has no co_version or none was made.
BorrowCache* thread_borrow_cache() {
  BorrowCache* cache = t_borrow_cache;
  if (cache != nullptr) return cache == kNoBorrowCache ? nullptr : cache;
  t_borrow_cache = kNoBorrowCache;
  if (!g_borrow_cache_key_made || g_borrow_cache_holds == nullptr) return nullptr;
  void* p = mmap(nullptr, sizeof(BorrowCache), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (pthread_setspecific(g_borrow_cache_key, p) != 0) {
    munmap(p, sizeof(BorrowCache));
    return nullptr;
  }
  t_borrow_cache = static_cast<BorrowCache*>(p);
  return t_borrow_cache;
}

// The chain entry of `frame` (not NULL) as it is now.
BorrowChainEntry borrow_chain_entry(uintptr_t frame) {
  const PythonLayout& l = g_reader.layout;
  BorrowChainEntry e{frame, load<uintptr_t>(frame, l.frame_code), load<uintptr_t>(frame, l.frame_instr), 0, false};
  e.is_code = e.code != 0 && load<uintptr_t>(e.code, l.object_type) == g_reader.code_type;
  if (e.is_code) e.code_version = code_version_of(e.code);
  return e;
}

// Whether the chain from `frame` is the one `c` remembers, frame for frame, to the same end: the same frame
// addresses, code objects (a code object: the same co_version; else still not a code object) and instructions.
// Compiled per layout with fixed offsets, as the walk is (the check runs at every borrowed allocation).
template <class L>
bool borrow_cache_holds(const BorrowCache& c, uintptr_t frame) {
  const PythonLayout& l = L::get();
  const int32_t previous = l.frame_previous, frame_code = l.frame_code, frame_instr = l.frame_instr,
                code_version = l.code_version, object_type = l.object_type;
  const BorrowChainEntry* was = c.chain;
  const BorrowChainEntry* const end = c.chain + c.depth;
  for (; frame != 0; frame = load<uintptr_t>(frame, previous), ++was) {
    if (was == end || was->frame != frame) return false;
    const uintptr_t code = load<uintptr_t>(frame, frame_code);
    if (code != was->code || load<uintptr_t>(frame, frame_instr) != was->instr) return false;
    if (was->is_code ? load<uint32_t>(code, code_version) != was->code_version
                     : code != 0 && load<uintptr_t>(code, object_type) == g_reader.code_type)
      return false;
  }
  return was == end && c.depth > 0;
}

// Remembers the read of the chain from `frame` that wrote `views` (`count`, at `capacity`, `cut`); a chain longer
// than kBorrowCacheChain, or a read wider than kBorrowCacheViews, leaves the cache empty.
void borrow_cache_store(BorrowCache* c, uintptr_t frame, const PythonFrameView* views, int count, int capacity,
                        bool cut) {
  c->depth = 0;
  if (capacity > kBorrowCacheViews) return;
  const int32_t previous = g_reader.layout.frame_previous;
  int i = 0;
  for (; frame != 0; frame = load<uintptr_t>(frame, previous), ++i) {
    if (i == kBorrowCacheChain) return;
    c->chain[i] = borrow_chain_entry(frame);
  }
  memcpy(c->views, views, sizeof(PythonFrameView) * static_cast<size_t>(count));
  c->count = count;
  c->capacity = capacity;
  c->cut = cut;
  c->depth = i;
}

uintptr_t find_backward_frame() {
  const Reader& r = g_reader;
  if (!r.interp_head || !r.interp_next || !r.thread_head || !r.thread_next) return 0;
  uintptr_t found = 0;
  int visited = 0;
  void* interp = r.interp_head();
  for (int interps = 0; interp != nullptr && interps < kMaxInterpreters; interp = r.interp_next(interp), ++interps) {
    for (void* tstate = r.thread_head(interp); tstate != nullptr; tstate = r.thread_next(tstate)) {
      if (++visited > kMaxThreadStates) return found;
      const uintptr_t frame = backward_frame_of(reinterpret_cast<uintptr_t>(tstate));
      if (frame == 0) continue;
      if (found != 0) return 0;
      found = frame;
    }
  }
  return found;
}

// The walk compiled for `layout`: a fixed-offset one when it is a built-in table.
ReadFramesFn read_frames_for(const PythonLayout& layout) {
  if (memcmp(&layout, &kLayout311, sizeof layout) == 0) return read_frames<Layout311>;
  if (memcmp(&layout, &kLayout312, sizeof layout) == 0) return read_frames<Layout312>;
  return read_frames<LayoutAtRunTime>;
}

// The borrow cache's check compiled for `layout`; NULL where it has no co_version (3.11: no cache).
BorrowHoldsFn borrow_cache_holds_for(const PythonLayout& layout) {
  if (layout.code_version < 0) return nullptr;
  if (memcmp(&layout, &kLayout312, sizeof layout) == 0) return borrow_cache_holds<Layout312>;
  return borrow_cache_holds<LayoutAtRunTime>;
}

// ---- init ----
// Fills `r` for the CPython `hex` found in the process. False, with the reason written to
// g_unsupported_reason, when this version cannot be read.
bool resolve_reader(uint32_t hex, Reader* r) {
  const unsigned major = hex >> 24, minor = (hex >> 16) & 0xff;
  r->runtime = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "_PyRuntime"));
  r->get_tstate = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  r->code_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  r->unicode_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  r->bytes_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyBytes_Type"));
  const char* missing = !r->runtime        ? "_PyRuntime"
                        : !r->get_tstate   ? "PyGILState_GetThisThreadState"
                        : !r->code_type    ? "PyCode_Type"
                        : !r->unicode_type ? "PyUnicode_Type"
                        : !r->bytes_type   ? "PyBytes_Type"
                                           : nullptr;
  if (missing) {
    snprintf(g_unsupported_reason, sizeof g_unsupported_reason, "CPython %u.%u does not export %s", major, minor,
             missing);
    return false;
  }
  r->interp_head = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyInterpreterState_Head"));
  r->interp_next = reinterpret_cast<void* (*)(void*)>(dlsym(RTLD_DEFAULT, "PyInterpreterState_Next"));
  r->thread_head = reinterpret_cast<void* (*)(void*)>(dlsym(RTLD_DEFAULT, "PyInterpreterState_ThreadHead"));
  r->thread_next = reinterpret_cast<void* (*)(void*)>(dlsym(RTLD_DEFAULT, "PyThreadState_Next"));
  void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  Dl_info info;
  ElfW(Sym)* symbol = nullptr;
  if (eval && dladdr1(eval, &info, reinterpret_cast<void**>(&symbol), RTLD_DL_SYMENT) && symbol) {
    r->eval_begin = reinterpret_cast<uintptr_t>(eval);
    r->eval_end = r->eval_begin + symbol->st_size;
  }
  if (major == 3 && (minor == 11 || minor == 12)) return python_builtin_layout(minor, &r->layout);
  if (major == 3 && minor == 13) {
    const char* why = "";
    if (python_layout_from_debug_offsets(reinterpret_cast<const void*>(r->runtime), &r->layout, &why)) return true;
    snprintf(g_unsupported_reason, sizeof g_unsupported_reason, "CPython %u.%u: %s", major, minor, why);
    return false;
  }
  snprintf(g_unsupported_reason, sizeof g_unsupported_reason,
           "CPython %u.%u has no frame reader (3.11, 3.12 and 3.13 have one)", major, minor);
  return false;
}

}  // namespace

uint64_t python_frame_key(const char* file, uint32_t file_len, const char* function, uint32_t function_len,
                          uint32_t line) {
  uint64_t h = hash_bytes(kHashSeed, file, file_len);
  h = hash_bytes(h ^ 0xff, function, function_len);
  return nonzero_key(hash_u64(h, line));
}

uint32_t python_line_from_table(const uint8_t* table, int64_t table_len, int32_t first_line, int64_t offset_bytes) {
  if (offset_bytes < 0) return first_line > 0 ? static_cast<uint32_t>(first_line) : 0;
  TableCursor c{table, table + table_len};
  int64_t line = first_line;
  int64_t range_start = 0;
  while (c.p < c.end) {
    uint8_t first = *c.p++;
    int code = (first >> 3) & 15;
    int64_t range_end = range_start + ((first & 7) + 1) * 2;
    bool no_location = code == 15;
    if (code == 13 || code == 14) {
      line += read_signed_varint(&c);
    } else if (code >= 10 && code <= 12) {
      line += code - 10;
    }
    if (offset_bytes < range_end) {
      if (no_location || line <= 0) return 0;
      return static_cast<uint32_t>(line);
    }
    while (c.p < c.end && (*c.p & 128) == 0) ++c.p;  // skip the rest of this entry
    range_start = range_end;
  }
  return 0;
}

bool python_builtin_layout(uint32_t minor, PythonLayout* out) {
  if (minor == 11) *out = kLayout311;
  else if (minor == 12) *out = kLayout312;
  else return false;
  return true;
}

bool python_layout_from_debug_offsets(const void* runtime, PythonLayout* out, const char** why) {
  const uint64_t* words = static_cast<const uint64_t*>(runtime);
  if (runtime == nullptr || memcmp(runtime, "xdebugpy", 8) != 0) {
    *why = "_PyRuntime does not start with the _Py_DebugOffsets cookie \"xdebugpy\"";
    return false;
  }
  if (((words[kDoVersion] >> 16) & 0xffff) != 0x030D) {
    *why = "_Py_DebugOffsets is not the 3.13 layout";
    return false;
  }
  if (words[kDoFreeThreaded] != 0) {
    *why = "free-threaded builds are not supported";
    return false;
  }
  for (int i = 3; i < kDoWords313; ++i) {
    if (words[i] > 1u << 20) {
      *why = "_Py_DebugOffsets holds an implausible offset";
      return false;
    }
  }
  auto at = [&](int word) { return static_cast<int32_t>(words[word]); };
  PythonLayout l{};
  l.minor_version = 13;
  l.tstate_cframe = -1;
  l.cframe_current_frame = -1;
  l.tstate_current_frame = at(kDoThreadCurrentFrame);
  l.frame_code = at(kDoFrameExecutable);
  l.frame_previous = at(kDoFramePrevious);
  l.frame_instr = at(kDoFrameInstrPtr);
  l.frame_owner = at(kDoFrameOwner);
  l.frame_is_entry = -1;
  l.owner_generator = 1;  // enum _frameowner, pycore_frame.h
  l.owner_cstack = 3;
  l.code_filename = at(kDoCodeFilename);
  l.code_qualname = at(kDoCodeQualname);
  l.code_linetable = at(kDoCodeLinetable);
  l.code_firstlineno = at(kDoCodeFirstlineno);
  l.code_firsttraceable = kCodeFirsttraceable313;
  l.code_code_adaptive = at(kDoCodeAdaptive);
  l.code_version = kCodeVersion313;
  l.object_type = at(kDoObjectType);
  l.bytes_size = at(kDoBytesSize);
  l.bytes_data = at(kDoBytesData);
  l.unicode_length = at(kDoUnicodeLength);
  l.unicode_state = at(kDoUnicodeState);
  l.unicode_ascii_size = at(kDoUnicodeAsciiSize);
  // PyCompactUnicodeObject = PyASCIIObject, then Py_ssize_t utf8_length, then char* utf8.
  l.unicode_utf8_length = l.unicode_ascii_size;
  l.unicode_utf8 = l.unicode_ascii_size + 8;
  l.unicode_compact_mask = 1u << 5;  // state bit field: interned:2, kind:3, compact:1, ascii:1
  l.unicode_ascii_mask = 1u << 6;
  l.runtime_finalizing = at(kDoRuntimeFinalizing);
  *out = l;
  return true;
}

// Names the version of a CPython older than 3.11 (which publishes no Py_Version) from the file that
// defines `symbol`: libpython3.10.so.1.0, or the python3.10 executable. Reading it from the interpreter
// (Py_GetVersion) would be a call into Python.
void describe_old_python(void* symbol) {
  Dl_info info{};
  const char* file = dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : "";
  char exe[512] = "";
  if (!*file || !strstr(file, "python")) {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    file = exe;
  }
  int major = 0, minor = 0;
  for (const char* p = strstr(file, "python"); p; p = strstr(p + 1, "python"))
    if (sscanf(p, "python%d.%d", &major, &minor) == 2) break;
  if (major == 3 && minor > 0 && minor < 11)
    snprintf(g_unsupported_reason, sizeof g_unsupported_reason,
             "CPython 3.%d has no frame reader (3.11, 3.12 and 3.13 have one)", minor);
  else
    snprintf(g_unsupported_reason, sizeof g_unsupported_reason,
             "CPython older than 3.11 has no frame reader (3.11, 3.12 and 3.13 have one)");
}

PythonSupport python_frames_init(uint32_t* hex_version) {
  pthread_mutex_lock(&g_init_mutex);
  int state = g_support.load(std::memory_order_relaxed);
  uint32_t hex = 0;
  if (const auto* py_version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"))) {
    hex = static_cast<uint32_t>(*py_version);
  }
  if (state == static_cast<int>(PythonSupport::kAbsent)) {
    if (hex != 0) {
      Reader reader{};
      if (resolve_reader(hex, &reader)) {
        g_reader = reader;
        g_read_frames = read_frames_for(g_reader.layout);
        g_borrow_cache_holds = borrow_cache_holds_for(g_reader.layout);
        // Made here, outside any hook; a failure leaves every thread without a walk memo.
        g_walk_memo_key_made = pthread_key_create(&g_walk_memo_key, release_walk_memo) == 0;
        g_borrow_cache_key_made = pthread_key_create(&g_borrow_cache_key, release_borrow_cache) == 0;
        state = static_cast<int>(PythonSupport::kSupported);
      } else {
        state = static_cast<int>(PythonSupport::kUnsupported);
      }
    } else if (void* is_initialized = dlsym(RTLD_DEFAULT, "Py_IsInitialized")) {
      // CPython before 3.11 (Py_Version appeared in 3.11): its frames are PyFrameObjects.
      describe_old_python(is_initialized);
      state = static_cast<int>(PythonSupport::kUnsupported);
    }
    g_support.store(state, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_init_mutex);
  if (hex_version) *hex_version = hex;
  return static_cast<PythonSupport>(state);
}

void python_frames_fork_prepare() { pthread_mutex_lock(&g_init_mutex); }
void python_frames_fork_parent() { pthread_mutex_unlock(&g_init_mutex); }
void python_frames_fork_child() {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_init_mutex = fresh;
}

const char* python_frames_unsupported_reason() {
  return g_support.load(std::memory_order_acquire) == static_cast<int>(PythonSupport::kUnsupported)
             ? g_unsupported_reason
             : "";
}

int python_frames_read(PythonFrameView* out, int capacity, bool* cut) {
  if (cut) *cut = false;
  if (!supported() || out == nullptr || capacity <= 0) return 0;
  uintptr_t frame = current_frame(reinterpret_cast<uintptr_t>(g_reader.get_tstate()));
  return frame != 0 ? g_read_frames(frame, out, capacity, cut) : 0;
}

int python_frames_read_backward(PythonFrameView* out, int capacity, bool* cut) {
  if (cut) *cut = false;
  if (!supported() || out == nullptr || capacity <= 0) return 0;
  const uintptr_t frame = find_backward_frame();
  if (frame == 0) return 0;
  BorrowCache* cache = t_borrow_cache_busy ? nullptr : thread_borrow_cache();
  if (cache == nullptr) return g_read_frames(frame, out, capacity, cut);
  t_borrow_cache_busy = true;
  int written;
  bool was_cut = false;
  if (cache->capacity == capacity && g_borrow_cache_holds(*cache, frame)) {
    written = cache->count;
    was_cut = cache->cut;
    memcpy(out, cache->views, sizeof(PythonFrameView) * static_cast<size_t>(written));
    ++t_borrow_reused;
  } else {
    written = g_read_frames(frame, out, capacity, &was_cut);
    borrow_cache_store(cache, frame, out, written, capacity, was_cut);
  }
  t_borrow_cache_busy = false;
  if (cut) *cut = was_cut;
  return written;
}

uint64_t python_frames_borrow_reused() { return t_borrow_reused; }

uint64_t python_frames_resolved() { return t_frames_resolved; }

bool python_is_eval_pc(uintptr_t pc) { return supported() && pc >= g_reader.eval_begin && pc < g_reader.eval_end; }

void python_eval_range(uintptr_t* begin, uintptr_t* end) {
  bool ok = supported();
  *begin = ok ? g_reader.eval_begin : 0;
  *end = ok ? g_reader.eval_end : 0;
}

bool python_is_finalizing() {
  return supported() && read_pointer(g_reader.runtime, g_reader.layout.runtime_finalizing) != 0;
}

}  // namespace memtrace
