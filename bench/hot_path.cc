// The tracer's hot path: one cudaMalloc + cudaFree pair (two events) through the CUDA test double
// (tests/fakecuda's libcudart.so.13), from a native stack of a chosen depth, with or without 20 Python frames
// above it. The same binary runs with and without LD_PRELOAD=libmemtrace.so; bench/hot_path runs both and
// prints the difference per event.
//
// Stack shape of one case, innermost first:
//   cudaMalloc <- recurse_then_allocate x R <- (Python case: hotbench.loop <- 20 x Python `down`
//   <- CPython's eval loop and call machinery) <- Google Benchmark <- main <- libc
// R is chosen so that the whole native stack, counted with glibc's backtrace() at the allocating frame,
// has `frames` entries; when the fixed part alone is deeper (the Python case's CPython frames), R is 0 and
// the counter native_frames says how deep it really is.
//
// One iteration is one pair, so time per iteration / 2 is the time per event (bench/hot_path divides).
// Counters per case: native_frames (as above), python_frames (20 or 0).
#include <Python.h>
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <execinfo.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kAllocationBytes = 1 << 20;  // 1 MiB: the double hands out any size; the figure is arbitrary
constexpr int kPythonDepth = 20;

int native_depth_here() {
  void* pcs[512];
  return backtrace(pcs, 512) - 1;  // minus this function's own frame
}

// One pair from the innermost frame. noinline + the volatile sink keep every level a real call frame.
__attribute__((noinline)) int allocate_and_free() {
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
}

void BM_NativeOnly(benchmark::State& state) {
  run_pairs(state, static_cast<int>(state.range(0)));
  state.counters["python_frames"] = 0;
}

// ---- the Python case: hotbench.loop() runs the timed loop 20 Python frames deep ----
benchmark::State* g_state = nullptr;
int g_frames = 0;

PyObject* hotbench_loop(PyObject*, PyObject*) {
  run_pairs(*g_state, g_frames);
  Py_RETURN_NONE;
}

PyMethodDef g_methods[] = {{"loop", hotbench_loop, METH_NOARGS, "runs the benchmark loop"}, {}};
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

void BM_WithPython(benchmark::State& state) {
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
  return g_down != nullptr;
}

}  // namespace

// Process CPU time: it counts the tracer's writer thread (compression, file writes) as well as the hook,
// and unlike wall time it does not grow when other jobs share the machine's cores.
BENCHMARK(BM_NativeOnly)->ArgName("frames")->Arg(8)->Arg(32)->Arg(64)->MeasureProcessCPUTime();
BENCHMARK(BM_WithPython)->ArgName("frames")->Arg(8)->Arg(32)->Arg(64)->MeasureProcessCPUTime();

int main(int argc, char** argv) {
  // The embedded interpreter finds its standard library under the installation it was linked against.
  setenv("PYTHONHOME", HOTBENCH_PYTHON_HOME, /*overwrite=*/0);
  // The interpreter starts before the first cudaMalloc, as in a Python job: the tracer finds it at start.
  if (!start_python()) {
    std::fprintf(stderr, "hot_path: cannot start the embedded Python interpreter\n");
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
