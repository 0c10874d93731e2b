// Backward attribution (python_frames_read_backward, capture_stack): embeds one CPython version and plays PyTorch's
// autograd. A Python thread calls a function named `_engine_run_backward` defined in a file whose path ends in
// torch/autograd/graph.py, which blocks in C (GIL released) while a std::thread -- started before the interpreter
// and the reader, with no Python thread state, like an autograd device thread already running when tracing starts
// -- captures its stack as a hook does. Its stack must end with exactly the Python thread's frames, flagged.
//
// main() does the Python work and records captures; the GoogleTest cases check them.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "record/schema.h"
#include "stacks/stack_capture.h"

namespace memtrace {
namespace {

struct Frame {
  std::string file;
  std::string function;
  uint32_t line;
  bool operator==(const Frame&) const = default;
};

struct Capture {
  std::vector<Frame> python;  // the CapturedStack's Python frames, innermost first
  bool from_backward = false;
  bool python_cut = false;
  int frame_count = 0;
  // Where the Python frames sit in frames[]: their indices, in stack order (-1 for a native frame).
  std::vector<int> python_order;
  int resolved = 0;  // frames the capturing thread's reader resolved rather than reusing from its walk memo
  int reused = 0;    // 1: the read was answered from the capturing thread's borrow cache
};

std::mutex g_mutex;
std::condition_variable g_changed;
std::map<std::string, Capture> g_captures;
std::string g_request;  // the label the worker is asked to capture under; "" when idle
bool g_quit = false;
bool g_holding = false;  // a second thread is parked in _engine_run_backward (hold())
bool g_release = false;
std::string g_graph_py;  // <temp dir>/torch/autograd/graph.py

// What the hooks do (recorder.cc: record_event): native frames as deep as a thread without Python frames keeps
// (32), 16 where the thread has its own.
Capture capture_here() {
  static thread_local CapturedStack stack;  // 19 KiB: not on the worker's stack
  uint64_t resolved_before = python_frames_resolved(), reused_before = python_frames_borrow_reused();
  capture_stack(&stack, /*max_native=*/32, /*max_native_with_python=*/16, /*with_python=*/true, /*path=*/1);
  Capture c;
  c.resolved = static_cast<int>(python_frames_resolved() - resolved_before);
  c.reused = static_cast<int>(python_frames_borrow_reused() - reused_before);
  c.from_backward = stack.python_from_backward;
  c.python_cut = stack.python_cut;
  c.frame_count = stack.frame_count;
  for (int i = 0; i < stack.python_count; ++i) {
    const PythonFrameView& v = stack.python[i];
    c.python.push_back({std::string(v.file, v.file_len), std::string(v.function, v.function_len), v.line});
  }
  for (int i = 0; i < stack.frame_count; ++i)
    c.python_order.push_back(stack.frames[i] & kPythonFrameBit ? static_cast<int>(stack.frames[i] & ~kPythonFrameBit)
                                                               : -1);
  return c;
}

// The fake autograd device thread: no Python thread state ever; captures twice when asked, as `label` and
// `label#2` (the second with nothing changed in between).
void worker_main() {
  std::unique_lock<std::mutex> lock(g_mutex);
  for (;;) {
    g_changed.wait(lock, [] { return g_quit || !g_request.empty(); });
    if (g_quit) return;
    std::string label = g_request;
    lock.unlock();
    Capture first = capture_here();
    Capture second = capture_here();
    lock.lock();
    g_captures[label] = std::move(first);
    g_captures[label + "#2"] = std::move(second);
    g_request.clear();
    g_changed.notify_all();
  }
}

// _mtbw.worker_capture(label): the calling Python thread releases the GIL and waits while the worker captures.
PyObject* worker_capture(PyObject*, PyObject* arg) {
  const char* label = PyUnicode_AsUTF8(arg);
  if (label == nullptr) return nullptr;
  std::string copy = label;
  Py_BEGIN_ALLOW_THREADS {
    std::unique_lock<std::mutex> lock(g_mutex);
    g_request = copy;
    g_changed.notify_all();
    g_changed.wait(lock, [] { return g_request.empty(); });
  }
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

// _mtbw.own_capture(label): the calling Python thread captures its own stack.
PyObject* own_capture(PyObject*, PyObject* arg) {
  const char* label = PyUnicode_AsUTF8(arg);
  if (label == nullptr) return nullptr;
  std::string copy = label;
  Capture c;
  Py_BEGIN_ALLOW_THREADS c = capture_here();
  Py_END_ALLOW_THREADS std::lock_guard<std::mutex> lock(g_mutex);
  g_captures[copy] = std::move(c);
  Py_RETURN_NONE;
}

// _mtbw.hold(): parks the calling thread (GIL released) until _mtbw.release().
PyObject* hold(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS {
    std::unique_lock<std::mutex> lock(g_mutex);
    g_holding = true;
    g_changed.notify_all();
    g_changed.wait(lock, [] { return g_release; });
  }
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

// _mtbw.wait_holding(): returns once a thread is parked in hold().
PyObject* wait_holding(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS {
    std::unique_lock<std::mutex> lock(g_mutex);
    g_changed.wait(lock, [] { return g_holding; });
  }
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* release(PyObject*, PyObject*) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_release = true;
  g_changed.notify_all();
  Py_RETURN_NONE;
}

PyMethodDef g_methods[] = {{"worker_capture", worker_capture, METH_O, "capture on the thread without Python"},
                           {"own_capture", own_capture, METH_O, "capture on the calling thread"},
                           {"hold", hold, METH_NOARGS, "park until release()"},
                           {"wait_holding", wait_holding, METH_NOARGS, "wait until a thread is parked"},
                           {"release", release, METH_NOARGS, "let the parked thread go"},
                           {nullptr, nullptr, 0, nullptr}};
PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "_mtbw", nullptr, -1, g_methods};
PyObject* init_module() { return PyModule_Create(&g_module); }

// torch/autograd/graph.py as this test defines it (line numbers matter).
constexpr const char* kGraphSource =
    "import _mtbw\n"                                              // 1
    "\n"                                                          // 2
    "def _engine_run_backward(label, park=False, again=True):\n"  // 3
    "    if park:\n"                                              // 4
    "        return _mtbw.hold()\n"                               // 5
    "    _mtbw.worker_capture(label)\n"                           // 6
    "    if again:\n"                                             // 7
    "        _mtbw.worker_capture(label + '_again')\n";           // 8
// The same function in a file that is not PyTorch's.
constexpr const char* kDecoySource =
    "import _mtbw\n"                      // 1
    "def _engine_run_backward(label):\n"  // 2
    "    _mtbw.worker_capture(label)\n";  // 3
// The training script: `engine` is graph.py's function, `decoy` the decoy's.
// backward() calls the engine from three lines; the second and third calls' innermost frames lie where the first's
// did and run the same instruction (graph.py line 6): only backward's own line differs.
constexpr const char* kTrainSource =
    "import _mtbw, threading\n"                                         // 1
    "def backward(engine):\n"                                           // 2
    "    engine('in_backward')\n"                                       // 3
    "    engine('first_line', again=False)\n"                           // 4
    "    engine('second_line', again=False)\n"                          // 5
    "def step():\n"                                                     // 6
    "    backward(engine)\n"                                            // 7
    "    _mtbw.worker_capture('outside')\n"                             // 8
    "    _mtbw.own_capture('own')\n"                                    // 9
    "    decoy('decoy')\n"                                              // 10
    "    t = threading.Thread(target=engine, args=('parked', True))\n"  // 11
    "    t.start()\n"                                                   // 12
    "    _mtbw.wait_holding()\n"                                        // 13
    "    engine('two_threads')\n"                                       // 14
    "    _mtbw.release()\n"                                             // 15
    "    t.join()\n"                                                    // 16
    "step()\n";                                                         // 17

// Compiles `source` under the file name `file` and runs it in `globals`; false on a Python error (printed).
bool run(const char* source, const std::string& file, PyObject* globals) {
  PyObject* code = Py_CompileString(source, file.c_str(), Py_file_input);
  if (code == nullptr) {
    PyErr_Print();
    return false;
  }
  PyObject* result = PyEval_EvalCode(code, globals, globals);
  Py_DECREF(code);
  if (result == nullptr) {
    PyErr_Print();
    return false;
  }
  Py_DECREF(result);
  return true;
}

// A namespace with builtins, for run().
PyObject* new_globals() {
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  return globals;
}

int run_python() {
  char dir_template[] = "/tmp/memtrace_backward_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  const std::string torch_dir = std::string(dir) + "/torch/autograd";
  if (system(("mkdir -p " + torch_dir).c_str()) != 0) return 1;
  g_graph_py = torch_dir + "/graph.py";
  std::ofstream(g_graph_py) << kGraphSource;

  std::thread worker(worker_main);  // before the interpreter and the reader exist
  uint32_t hex = 0;
  if (python_frames_init(&hex) != PythonSupport::kSupported || !stack_capture_init()) return 1;
  if (PyImport_AppendInittab("_mtbw", init_module) != 0) return 1;
  Py_InitializeEx(0);
  PyObject* graph = new_globals();
  PyObject* decoy = new_globals();
  PyObject* train = new_globals();
  bool ok = run(kGraphSource, g_graph_py, graph) && run(kDecoySource, std::string(dir) + "/decoy.py", decoy);
  if (ok) {
    PyDict_SetItemString(train, "engine", PyDict_GetItemString(graph, "_engine_run_backward"));
    PyDict_SetItemString(train, "decoy", PyDict_GetItemString(decoy, "_engine_run_backward"));
    ok = run(kTrainSource, "train.py", train);
  }
  Py_DECREF(graph);
  Py_DECREF(decoy);
  Py_DECREF(train);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_quit = true;
    g_changed.notify_all();
  }
  worker.join();
  if (Py_FinalizeEx() != 0) ok = false;
  unlink(g_graph_py.c_str());
  return ok ? 0 : 1;
}

const Capture& capture(const std::string& label) {
  static const Capture kMissing;
  auto it = g_captures.find(label);
  EXPECT_NE(it, g_captures.end()) << label;
  return it == g_captures.end() ? kMissing : it->second;
}

// The waiting thread's frames, innermost first: graph.py's _engine_run_backward at the worker_capture call of
// `graph_line`, then the script's backward at `backward_line`, step (line 7) and the module (line 17).
std::vector<Frame> backward_frames(uint32_t graph_line, uint32_t backward_line = 3) {
  return {{g_graph_py, "_engine_run_backward", graph_line},
          {"train.py", "backward", backward_line},
          {"train.py", "step", 7},
          {"train.py", "<module>", 17}};
}

// The borrow cache exists where code objects have co_version (3.12+); on 3.11 the walk memo alone serves.
constexpr int kCacheHit = PY_MINOR_VERSION >= 12 ? 1 : 0;

// The borrowed frames follow every native frame, in their order: frames[] ends with Python frames 0, 1, 2, 3.
void expect_outermost(const Capture& c, int python_count) {
  ASSERT_GT(c.frame_count, python_count);  // the worker's own native frames (its thread start) come first
  for (int i = 0; i < c.frame_count; ++i) {
    const int python_index = i - (c.frame_count - python_count);
    EXPECT_EQ(c.python_order[i], python_index >= 0 ? python_index : -1) << "frame " << i;
  }
}

TEST(BackwardAttribution, WorkerTakesTheWaitingThreadsFrames) {
  const Capture& c = capture("in_backward");
  EXPECT_EQ(c.python, backward_frames(6, 3));
  EXPECT_TRUE(c.from_backward);
  EXPECT_FALSE(c.python_cut);
  expect_outermost(c, 4);
  EXPECT_EQ(c.resolved, 4);  // the worker's first read of that chain
  EXPECT_EQ(c.reused, 0);
}

// Nothing changed since the previous capture: the same frames, read from the worker's borrow cache (no frame
// resolved; 3.11 reuses all four from the walk memo).
TEST(BackwardAttribution, UnchangedChainIsReused) {
  for (const char* label : {"in_backward#2", "in_backward_again#2", "first_line#2", "second_line#2"}) {
    SCOPED_TRACE(label);
    const Capture& c = capture(label);
    const Capture& first = capture(std::string(label).substr(0, std::string(label).size() - 2));
    EXPECT_EQ(c.python, first.python);
    EXPECT_TRUE(c.from_backward);
    expect_outermost(c, 4);
    EXPECT_EQ(c.resolved, 0);
    EXPECT_EQ(c.reused, kCacheHit);
  }
}

// backward() called the engine again from its next line: the innermost frame is where it was, at the same
// instruction, but the outer chain differs (backward's line), so nothing is reused from the cache and the line is
// the new one. first_line: the memo resolves the two frames that changed since in_backward_again (graph.py's back
// at line 6, backward's at line 4); second_line: only backward's, at line 5.
TEST(BackwardAttribution, SameInnermostFrameFromAnotherLineIsReadAgain) {
  const Capture& first = capture("first_line");
  EXPECT_EQ(first.python, backward_frames(6, 4));
  EXPECT_TRUE(first.from_backward);
  EXPECT_EQ(first.reused, 0);
  EXPECT_EQ(first.resolved, 2);
  const Capture& second = capture("second_line");
  EXPECT_EQ(second.python, backward_frames(6, 5));
  EXPECT_TRUE(second.from_backward);
  EXPECT_EQ(second.reused, 0);
  EXPECT_EQ(second.resolved, 1);
}

// The waiting thread moved on one line inside _engine_run_backward: only that frame is read again; the three
// outer ones come from the worker's walk memo.
TEST(BackwardAttribution, SecondCaptureReusesTheOuterFrames) {
  const Capture& c = capture("in_backward_again");
  EXPECT_EQ(c.python, backward_frames(8, 3));
  EXPECT_TRUE(c.from_backward);
  expect_outermost(c, 4);
  EXPECT_EQ(c.resolved, 1);
  EXPECT_EQ(c.reused, 0);
}

// No thread in backward (the Python thread's innermost frame is step): no Python frames, no flag, native frames
// only.
TEST(BackwardAttribution, NoThreadInBackwardGivesNoFrames) {
  const Capture& c = capture("outside");
  EXPECT_TRUE(c.python.empty());
  EXPECT_FALSE(c.from_backward);
  EXPECT_EQ(c.python_order, std::vector<int>(c.frame_count, -1));
}

// A Python thread's own allocation: its own frames, spliced where its evaluation loop runs them; no flag.
TEST(BackwardAttribution, PythonThreadKeepsItsOwnFrames) {
  const Capture& c = capture("own");
  EXPECT_EQ(c.python, (std::vector<Frame>{{"train.py", "step", 9}, {"train.py", "<module>", 17}}));
  EXPECT_FALSE(c.from_backward);
}

// A function of the same name in another file is not PyTorch's entry point.
TEST(BackwardAttribution, SameNameInAnotherFileIsNotBackward) {
  const Capture& c = capture("decoy");
  EXPECT_TRUE(c.python.empty());
  EXPECT_FALSE(c.from_backward);
}

// Two threads in backward at once: which one the worker serves is unknown, so neither is used.
TEST(BackwardAttribution, TwoThreadsInBackwardGiveNoFrames) {
  for (const char* label : {"two_threads", "two_threads#2", "two_threads_again", "two_threads_again#2"}) {
    const Capture& c = capture(label);
    EXPECT_TRUE(c.python.empty()) << label;
    EXPECT_FALSE(c.from_backward) << label;
  }
}

// Every capture the script asks for ran: 8 worker requests of two captures each, and the own one.
TEST(BackwardAttribution, EveryCaptureRan) { EXPECT_EQ(g_captures.size(), 17u); }

}  // namespace
}  // namespace memtrace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (memtrace::run_python() != 0) {
    fprintf(stderr, "backward_test: the script failed under CPython %s\n", PY_VERSION);
    return 1;
  }
  return RUN_ALL_TESTS();
}
