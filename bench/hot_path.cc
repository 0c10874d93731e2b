// The tracer's hot path: one allocation + free pair (two events) from a native stack of a chosen depth, with or
// without 20 Python frames above it, through one of two paths:
//   cuda   cudaMalloc + cudaFree through the CUDA test double (tests/fakecuda's libcudart.so.13);
//   torch  the two calls PyTorch's caching allocator makes for one block, c10::reportMemoryUsageToProfiler(+size)
//          and (-size), to the symbol the process resolves (libmemtrace.so's hook when preloaded, else the test
//          double's libc10.so): the path of every tensor of a real training loop.
// The same binary runs with and without LD_PRELOAD=libmemtrace.so; bench/hot_path runs both and prints the
// difference per event.
//
// Stack shape of one case, innermost first:
//   cudaMalloc <- recurse_then_allocate x R <- (Python case: hotbench.loop <- 20 x Python `down`
//   <- CPython's eval loop and call machinery) <- Google Benchmark <- main <- libc
// R is chosen so that the whole native stack, counted with glibc's backtrace() at the allocating frame,
// has `frames` entries; when the fixed part alone is deeper (the Python case's CPython frames), R is 0 and
// the counter native_frames says how deep it really is.
//
// One iteration is one pair, so time per iteration / 2 is the time per event (bench/hot_path divides).
// Counters per case: native_frames (as above), python_frames (20 or 0), torch (1 for the torch path).
#include <Python.h>
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <execinfo.h>

#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

constexpr size_t kAllocationBytes = 1 << 20;  // 1 MiB: the double hands out any size; the figure is arbitrary
constexpr int kPythonDepth = 20;

int native_depth_here() {
  void* pcs[512];
  return backtrace(pcs, 512) - 1;  // minus this function's own frame
}

// c10::reportMemoryUsageToProfiler(void*, int64_t, size_t, size_t, c10::Device) (c10/core/Allocator.h), with
// c10::Device as its ABI passes it: two int8_t (DeviceType::CUDA = 1, device index) in one register.
struct C10Device {
  int8_t type;
  int8_t index;
};
using ReportMemoryUsageFn = void (*)(void*, int64_t, size_t, size_t, C10Device);
ReportMemoryUsageFn g_report_memory_usage = nullptr;
bool g_torch_path = false;

// The cold cases (the *Cold benchmarks): between two events the job's own work runs, which in a real training
// loop (about 128 us of PyTorch kernels launched and Python run between two allocator events on the GPU machine,
// docs/performance.md) pushes the tracer's data out of L1 and L2. Here that work is a sweep over a buffer larger
// than this machine's L2 (2 MiB a core): one byte written per 64-byte line, so every line of the tracer's that was
// in L1/L2 is gone, while the sweep stays within L3 as the job's data does there. HOTBENCH_EVICT_MIB sets the size
// (default 8 MiB); 0 turns the sweep off, which makes a cold case a warm one.
bool g_evict = false;
uint8_t* g_evict_buffer = nullptr;
size_t g_evict_bytes = 0;

__attribute__((noinline)) void evict_caches() {
  if (!g_evict_buffer) return;
  for (size_t i = 0; i < g_evict_bytes; i += 64) g_evict_buffer[i]++;
  benchmark::ClobberMemory();
}

// HOTBENCH_EVICT_HUGE=1 backs the sweep with 2 MiB pages (madvise, where transparent huge pages allow it): the
// sweep then evicts the caches but leaves the TLB's entries for the tracer's pages, which separates what an
// event pays for cache misses from what it pays for page walks.
void set_up_eviction() {
  const char* mib = getenv("HOTBENCH_EVICT_MIB");
  g_evict_bytes = static_cast<size_t>(mib ? atol(mib) : 8) << 20;
  if (!g_evict_bytes) return;
  const char* huge = getenv("HOTBENCH_EVICT_HUGE");
  if (huge && huge[0] == '1') {
    constexpr size_t kHugePage = 2u << 20;
    g_evict_bytes = (g_evict_bytes + kHugePage - 1) & ~(kHugePage - 1);
    void* p = mmap(nullptr, g_evict_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    madvise(p, g_evict_bytes, MADV_HUGEPAGE);
    g_evict_buffer = static_cast<uint8_t*>(p);
  } else {
    g_evict_buffer = static_cast<uint8_t*>(calloc(g_evict_bytes, 1));
  }
}

// One block allocation and its free as the caching allocator reports them: the allocator's allocated and
// reserved totals after each change (one 20 MiB segment reserved). In the cold cases the caches are swept
// before each of the two events, as in a training loop, where a block's free comes long after its allocation.
__attribute__((noinline)) int report_block_pair() {
  static char block;  // any address: the hook records it, nothing dereferences it
  constexpr size_t kReservedBytes = 20u << 20;
  if (g_evict) evict_caches();
  g_report_memory_usage(&block, static_cast<int64_t>(kAllocationBytes), kAllocationBytes, kReservedBytes,
                        C10Device{1, 0});
  if (g_evict) evict_caches();
  g_report_memory_usage(&block, -static_cast<int64_t>(kAllocationBytes), 0, kReservedBytes, C10Device{1, 0});
  return 0;
}

// Pairs made by this process, for an instruction count per pair (bench/hot_path_callgrind: the benchmark library
// reports only the last of the runs it makes of a case, and callgrind counts them all).
uint64_t g_pairs = 0;

// One pair from the innermost frame. noinline + the volatile sink keep every level a real call frame.
__attribute__((noinline)) int allocate_and_free() {
  ++g_pairs;
  if (g_torch_path) return report_block_pair();
  void* p = nullptr;
  if (cudaMalloc(&p, kAllocationBytes) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
  return 0;
}

volatile int g_sink;

__attribute__((noinline)) int recurse_then_allocate(int levels) {
  int r = levels > 0 ? recurse_then_allocate(levels - 1) : allocate_and_free();
  g_sink = levels;  // after the call: no tail call, so the frame stays on the stack
  return r;
}

// The depth at which allocate_and_free would see `levels` recursion frames: measured once per case.
__attribute__((noinline)) int depth_with_levels(int levels) {
  int r = levels > 0 ? depth_with_levels(levels - 1) : native_depth_here();
  g_sink = levels;
  return r;
}

// Runs the timed loop for `state` at a total native depth of `frames`.
void run_pairs(benchmark::State& state, int frames) {
  int base = depth_with_levels(0);
  int levels = frames > base ? frames - base : 0;
  int actual = depth_with_levels(levels);
  int failures = 0;
  for (auto _ : state) failures += recurse_then_allocate(levels);
  if (failures) state.SkipWithError("cudaMalloc or cudaFree failed");
  state.counters["native_frames"] = actual;
  state.counters["torch"] = g_torch_path;
}

void BM_NativeOnly(benchmark::State& state) {
  g_torch_path = false;
  run_pairs(state, static_cast<int>(state.range(0)));
  state.counters["python_frames"] = 0;
}

void BM_TorchBlock(benchmark::State& state) {
  g_torch_path = true;
  g_evict = false;
  run_pairs(state, static_cast<int>(state.range(0)));
  state.counters["python_frames"] = 0;
}

// The torch path with the caches swept before each event (see evict_caches): bench/hot_path_cold runs it
// under the tracer's per-phase cycle counts. Its time is mostly the sweep, so it is not in bench/hot_path's
// table.
void BM_TorchBlockCold(benchmark::State& state) {
  g_torch_path = true;
  g_evict = true;
  run_pairs(state, static_cast<int>(state.range(0)));
  g_evict = false;
  state.counters["python_frames"] = 0;
}

// ---- the Python case: hotbench.loop() runs the timed loop 20 Python frames deep ----
benchmark::State* g_state = nullptr;
int g_frames = 0;

PyObject* hotbench_loop(PyObject*, PyObject*) {
  run_pairs(*g_state, g_frames);
  Py_RETURN_NONE;
}

PyObject* hotbench_worker_loop(PyObject*, PyObject*);
PyMethodDef g_methods[] = {{"loop", hotbench_loop, METH_NOARGS, "runs the benchmark loop"},
                           {"worker_loop", hotbench_worker_loop, METH_NOARGS, "runs it on a thread without Python"},
                           {}};
PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "hotbench", nullptr, -1, g_methods};
PyObject* init_hotbench() { return PyModule_Create(&g_module); }

// down(1) is the 20th frame when called as down(20); it calls hotbench.loop().
const char kPythonSource[] =
    "import hotbench\n"
    "def down(n):\n"
    "    if n > 1:\n"
    "        return down(n - 1)\n"
    "    return hotbench.loop()\n";
PyObject* g_down = nullptr;

void run_with_python(benchmark::State& state) {
  g_state = &state;
  g_frames = static_cast<int>(state.range(0));
  PyObject* result = PyObject_CallFunction(g_down, "i", kPythonDepth);
  if (!result) {
    PyErr_Print();
    state.SkipWithError("the Python driver failed");
    return;
  }
  Py_DECREF(result);
  state.counters["python_frames"] = kPythonDepth;
}

void BM_WithPython(benchmark::State& state) {
  g_torch_path = false;
  run_with_python(state);
}

void BM_TorchBlockWithPython(benchmark::State& state) {
  g_torch_path = true;
  g_evict = false;
  run_with_python(state);
}

// ---- the backward case: a thread without Python allocates while a Python thread waits in backward ----
// The Python thread (the benchmark's) calls _engine_run_backward, defined in a file named like PyTorch's
// torch/autograd/graph.py, 20 frames deep; it calls hotbench.worker_loop(), which releases the GIL and runs the
// timed loop on a std::thread that has no Python thread state: an autograd device thread's allocations, which the
// tracer attributes to the waiting thread's 21 Python frames (docs/tracing.md).
PyObject* hotbench_worker_loop(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS std::thread([] { run_pairs(*g_state, g_frames); }).join();
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* g_backward_down = nullptr;
const char kBackwardFile[] = "/hotbench/torch/autograd/graph.py";
const char kBackwardSource[] =
    "import hotbench\n"
    "def down(n):\n"
    "    if n > 1:\n"
    "        return down(n - 1)\n"
    "    return _engine_run_backward()\n"
    "def _engine_run_backward():\n"
    "    return hotbench.worker_loop()\n";

void BM_TorchBlockBackwardWorker(benchmark::State& state) {
  g_torch_path = true;
  g_evict = false;
  g_state = &state;
  g_frames = static_cast<int>(state.range(0));
  PyObject* result = PyObject_CallFunction(g_backward_down, "i", kPythonDepth);
  if (!result) {
    PyErr_Print();
    state.SkipWithError("the Python driver failed");
    return;
  }
  Py_DECREF(result);
  state.counters["python_frames"] = kPythonDepth + 1;
}

void BM_TorchBlockWithPythonCold(benchmark::State& state) {
  g_torch_path = true;
  g_evict = true;
  run_with_python(state);
  g_evict = false;
}

// The hook as PyTorch's libc10_cuda.so binds it: the first definition in the process's lookup order, which is
// libmemtrace.so's when it is preloaded. The test double's libc10.so (on LD_LIBRARY_PATH) is loaded globally
// first, so that without the tracer the call reaches it, and with the tracer the hook finds it to forward to.
bool find_report_memory_usage() {
  if (!dlopen("libc10.so", RTLD_NOW | RTLD_GLOBAL)) {
    std::fprintf(stderr, "hot_path: cannot load the test double's libc10.so: %s\n", dlerror());
    return false;
  }
  g_report_memory_usage = reinterpret_cast<ReportMemoryUsageFn>(
      dlsym(RTLD_DEFAULT, "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"));
  return g_report_memory_usage != nullptr;
}

bool start_python() {
  PyImport_AppendInittab("hotbench", init_hotbench);
  Py_InitializeEx(0);
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* ran = PyRun_String(kPythonSource, Py_file_input, globals, globals);
  if (!ran) {
    PyErr_Print();
    return false;
  }
  Py_DECREF(ran);
  g_down = PyDict_GetItemString(globals, "down");
  Py_XINCREF(g_down);
  PyObject* backward_globals = PyDict_New();
  PyDict_SetItemString(backward_globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* code = Py_CompileString(kBackwardSource, kBackwardFile, Py_file_input);
  PyObject* ran_backward = code ? PyEval_EvalCode(code, backward_globals, backward_globals) : nullptr;
  Py_XDECREF(code);
  if (!ran_backward) {
    PyErr_Print();
    return false;
  }
  Py_DECREF(ran_backward);
  g_backward_down = PyDict_GetItemString(backward_globals, "down");
  Py_XINCREF(g_backward_down);
  return g_down != nullptr && g_backward_down != nullptr;
}

}  // namespace

// Process CPU time: it counts the tracer's writer thread (compression, file writes) as well as the hook,
// and unlike wall time it does not grow when other jobs share the machine's cores.
BENCHMARK(BM_NativeOnly)->ArgName("frames")->Arg(8)->Arg(32)->Arg(64)->MeasureProcessCPUTime();
BENCHMARK(BM_WithPython)->ArgName("frames")->Arg(8)->Arg(32)->Arg(64)->MeasureProcessCPUTime();
BENCHMARK(BM_TorchBlock)->ArgName("frames")->Arg(8)->Arg(32)->Arg(64)->MeasureProcessCPUTime();
BENCHMARK(BM_TorchBlockWithPython)->ArgName("frames")->Arg(32)->Arg(64)->MeasureProcessCPUTime();
BENCHMARK(BM_TorchBlockCold)->ArgName("frames")->Arg(32)->MeasureProcessCPUTime();
BENCHMARK(BM_TorchBlockBackwardWorker)->ArgName("frames")->Arg(32)->MeasureProcessCPUTime();
BENCHMARK(BM_TorchBlockWithPythonCold)->ArgName("frames")->Arg(32)->MeasureProcessCPUTime();

int main(int argc, char** argv) {
  // The embedded interpreter finds its standard library under the installation it was linked against.
  setenv("PYTHONHOME", HOTBENCH_PYTHON_HOME, /*overwrite=*/0);
  // The interpreter starts before the first cudaMalloc, as in a Python job: the tracer finds it at start.
  if (!start_python()) {
    std::fprintf(stderr, "hot_path: cannot start the embedded Python interpreter\n");
    return 1;
  }
  if (!find_report_memory_usage()) return 1;
  set_up_eviction();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (getenv("HOTBENCH_PRINT_PAIRS"))
    std::fprintf(stderr, "hot_path: %llu pairs\n", static_cast<unsigned long long>(g_pairs));
  return 0;
}
