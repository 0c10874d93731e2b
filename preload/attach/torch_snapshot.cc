#include "attach/torch_snapshot.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "hooks/resolver.h"

namespace memtrace {
namespace {

// The snippet; its answer's format is torch_snapshot_parse.cc's.
constexpr const char kSnippet[] = R"PY(
def _memtrace_snapshot():
    import sys
    torch = sys.modules.get('torch')
    if torch is None or 'torch.cuda' not in sys.modules:
        return b'E torch is not imported in this process'
    cuda = torch.cuda
    if not cuda.is_initialized():
        return b'E torch.cuda is not initialized in this process'
    backend = cuda.get_allocator_backend() if hasattr(cuda, 'get_allocator_backend') else 'native'
    lines = ['A ' + backend]
    listed = {}
    if backend == 'native':
        for seg in cuda.memory_snapshot():
            d = int(seg['device'])
            stream = int(seg.get('stream', 0))
            address = int(seg['address'])
            lines.append('S %d %d %d %d %d' % (d, address, int(seg['total_size']), stream,
                                               1 if seg.get('is_expandable') else 0))
            for b in seg['blocks']:
                size = int(b['size'])
                if b['state'] == 'active_allocated':
                    lines.append('B %d %d %d %d' % (d, int(b.get('address', address)), size, stream))
                    listed[d] = listed.get(d, 0) + size
                address += size
    has_context = getattr(torch._C, '_cuda_hasPrimaryContext', None)
    for d in range(cuda.device_count()):
        reserved = int(cuda.memory_reserved(d))
        if has_context is not None and not has_context(d) and reserved == 0:
            continue
        if has_context is None and reserved == 0 and d != cuda.current_device():
            continue
        allocated = int(cuda.memory_allocated(d))
        try:
            free, total = cuda.mem_get_info(d)
        except Exception:
            free, total = 0, 0
        lines.append('D %d %d %d %d %d' % (d, free, total, allocated, reserved))
        if backend == 'native' and listed.get(d, 0) != allocated:
            lines.append('W device %d: the snapshot lists %d bytes of blocks, memory_allocated() says %d'
                         % (d, listed.get(d, 0), allocated))
    return '\n'.join(lines).encode()
try:
    _memtrace_result = _memtrace_snapshot()
except Exception as e:
    _memtrace_result = ('E torch.cuda.memory_snapshot failed: %s' % e).splitlines()[0].encode()
)PY";

// The snippet's answer is copied into a buffer of at most this many bytes (about 1.5 million blocks).
constexpr size_t kMaxAnswerBytes = size_t{64} << 20;

// The CPython C API the snapshot calls, found by name in the process (dlsym(RTLD_DEFAULT)): present wherever the
// python executable or libpython is loaded globally, as the interpreter always is.
struct Python {
  int (*is_initialized)();
  int (*is_finalizing)();  // Py_IsFinalizing (3.13) or _Py_IsFinalizing; may be null
  int (*gil_ensure)();     // PyGILState_STATE is an int-sized enum
  void (*gil_release)(int);
  void* (*dict_new)();
  int (*dict_set_item_string)(void*, const char*, void*);
  void* (*dict_get_item_string)(void*, const char*);
  void* (*eval_get_builtins)();
  void* (*run_string)(const char*, int, void*, void*);
  int (*bytes_as_string_and_size)(void*, char**, ssize_t*);
  void (*dec_ref)(void*);
  void (*err_clear)();
};
constexpr int kPyFileInput = 257;  // Py_file_input (Include/compile.h), unchanged since Python 2

template <typename Fn>
bool find(const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(real_dlsym(RTLD_DEFAULT, symbol));
  return *out != nullptr;
}

bool find_python(Python* py) {
  if (!find("Py_IsFinalizing", &py->is_finalizing)) find("_Py_IsFinalizing", &py->is_finalizing);
  return find("Py_IsInitialized", &py->is_initialized) && find("PyGILState_Ensure", &py->gil_ensure) &&
         find("PyGILState_Release", &py->gil_release) && find("PyDict_New", &py->dict_new) &&
         find("PyDict_SetItemString", &py->dict_set_item_string) &&
         find("PyDict_GetItemString", &py->dict_get_item_string) &&
         find("PyEval_GetBuiltins", &py->eval_get_builtins) && find("PyRun_String", &py->run_string) &&
         find("PyBytes_AsStringAndSize", &py->bytes_as_string_and_size) && find("Py_DecRef", &py->dec_ref) &&
         find("PyErr_Clear", &py->err_clear);
}

// A bounded copy of the snippet's answer (mmap'd, so that no heap of the job's is touched).
struct Answer {
  char* bytes = nullptr;
  size_t size = 0;
  size_t mapped = 0;
  ~Answer() {
    if (bytes) munmap(bytes, mapped);
  }
};

// Runs the snippet under the GIL and copies its answer; `*moved`: pool events were recorded while it ran
// (SnapshotSink.pool_events). False with `why` when it could not run.
bool run_snippet(const Python& py, const SnapshotSink& sink, Answer* answer, bool* moved, char* why, size_t why_size) {
  int gil = py.gil_ensure();
  const uint64_t events_before = sink.pool_events ? sink.pool_events(sink.context) : 0;
  bool ok = false;
  void* globals = py.dict_new();
  if (globals && py.dict_set_item_string(globals, "__builtins__", py.eval_get_builtins()) == 0) {
    void* result = py.run_string(kSnippet, kPyFileInput, globals, globals);
    char* text = nullptr;
    ssize_t length = 0;
    void* bytes = result ? py.dict_get_item_string(globals, "_memtrace_result") : nullptr;  // borrowed
    if (bytes && py.bytes_as_string_and_size(bytes, &text, &length) == 0 && length > 0) {
      size_t size = static_cast<size_t>(length) < kMaxAnswerBytes ? static_cast<size_t>(length) : kMaxAnswerBytes;
      void* copy = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (copy != MAP_FAILED) {
        memcpy(copy, text, size);
        answer->bytes = static_cast<char*>(copy);
        answer->size = size;
        answer->mapped = size;
        ok = true;
        if (static_cast<size_t>(length) > size) snprintf(why, why_size, "the snapshot was cut at %zu bytes", size);
      }
    }
    if (!ok) {
      py.err_clear();
      snprintf(why, why_size, "the snapshot snippet did not run in the interpreter");
    }
    if (result) py.dec_ref(result);
  } else {
    py.err_clear();
    snprintf(why, why_size, "no dict for the snapshot snippet");
  }
  if (globals) py.dec_ref(globals);
  *moved = sink.pool_events && sink.pool_events(sink.context) != events_before;
  py.gil_release(gil);
  return ok;
}

// The answer's first line names the cudaMallocAsync backend ("A cudaMallocAsync"; torch_snapshot_parse.cc).
bool answer_is_async_backend(const Answer& answer) {
  static const char kLine[] = "A cudaMallocAsync";
  const size_t n = sizeof kLine - 1;
  return answer.size >= n && memcmp(answer.bytes, kLine, n) == 0 && (answer.size == n || answer.bytes[n] == '\n');
}

}  // namespace

bool torch_snapshot_list(const SnapshotSink& sink, char* why, size_t why_size) {
  if (why_size) why[0] = '\0';
  Python py{};
  if (!find_python(&py)) {
    snprintf(why, why_size, "no Python interpreter in this process: no PyTorch snapshot");
    return false;
  }
  if (!py.is_initialized() || (py.is_finalizing && py.is_finalizing())) {
    snprintf(why, why_size, "the Python interpreter is not running: no PyTorch snapshot");
    return false;
  }
  // Under the cudaMallocAsync backend the answer must belong to one point of the event stream (SnapshotSink).
  for (int attempt = 1;; attempt++) {
    Answer answer;
    bool moved = false;
    if (!run_snippet(py, sink, &answer, &moved, why, why_size)) return false;
    const bool settled = !moved || !answer_is_async_backend(answer);
    if (!settled && attempt < kSnapshotAttempts) {
      if (why_size) why[0] = '\0';
      const timespec pause{0, 1000000};
      nanosleep(&pause, nullptr);
      continue;
    }
    bool cut = why_size && why[0];
    bool complete = torch_snapshot_parse(answer.bytes, answer.size, sink, why, why_size) && !cut;
    if (!settled) {
      snprintf(why, why_size,
               "allocations went on through each of %d readings of memory_allocated(): the bytes allocated before "
               "attach may be off by what they moved",
               kSnapshotAttempts);
      complete = false;
    }
    return complete;
  }
}

}  // namespace memtrace
