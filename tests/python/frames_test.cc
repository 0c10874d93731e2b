// Embeds one CPython version (the one whose Python.h and libpython this binary is built against), runs
// probe_script.py and checks what python_frames_read saw at each _mtprobe.probe(label) call.
//
// main() does all the Python work first and records "captures"; the GoogleTest cases then check them,
// because the finalization capture only exists after Py_FinalizeEx.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stacks/python_frames.h"

namespace memtrace {
namespace {

struct Frame {
  std::string file;
  std::string function;
  uint32_t line;
  bool ends_eval_call;
  bool key_matches = true;  // the view's key is python_frame_key() of its own file, function and line
};

struct Capture {
  std::string label;
  int frame_count = -1;
  int resolved = -1;  // frames this read resolved instead of reusing them from the thread's walk memo
  std::vector<Frame> frames;
  bool finalizing = false;
  int eval_pcs = 0;  // native return addresses on the stack inside _PyEval_EvalFrameDefault
  bool cut = false;  // the read said that frames beyond the 64 it keeps were left out
};

std::mutex g_mutex;
std::vector<Capture> g_captures;
std::map<std::string, long> g_notes;  // _mtprobe.note(name, value)
PythonSupport g_support_before_init = PythonSupport::kAbsent;
uint32_t g_hex_version = 0;
int g_frames_before_init = -1;
long g_offsets_compared = 0;  // instruction offsets whose line was checked against PyCode_Addr2Line
long g_line_mismatches = 0;

// What a hook does: read the frames with the GIL released, then copy the strings out.
Capture read_frames(const std::string& label) {
  PythonFrameView views[64];
  void* pcs[256];
  Capture capture;
  capture.label = label;
  int pc_count = backtrace(pcs, 256);
  uint64_t resolved_before = python_frames_resolved();
  capture.frame_count = python_frames_read(views, 64, &capture.cut);
  capture.resolved = static_cast<int>(python_frames_resolved() - resolved_before);
  capture.finalizing = python_is_finalizing();
  for (int i = 0; i < pc_count; ++i) capture.eval_pcs += python_is_eval_pc(reinterpret_cast<uintptr_t>(pcs[i]));
  for (int i = 0; i < capture.frame_count; ++i) {
    const PythonFrameView& v = views[i];
    capture.frames.push_back({std::string(v.file, v.file_len), std::string(v.function, v.function_len), v.line,
                              v.ends_eval_call,
                              v.key == python_frame_key(v.file, v.file_len, v.function, v.function_len, v.line)});
  }
  return capture;
}

PyObject* probe(PyObject*, PyObject* arg) {
  const char* label = PyUnicode_AsUTF8(arg);
  if (label == nullptr) return nullptr;
  std::string label_copy = label;
  Capture capture;
  Py_BEGIN_ALLOW_THREADS capture = read_frames(label_copy);
  Py_END_ALLOW_THREADS std::lock_guard<std::mutex> lock(g_mutex);
  g_captures.push_back(std::move(capture));
  Py_RETURN_NONE;
}

// Test helper: makes CPython cache the UTF-8 form of a str, as any PyUnicode_AsUTF8 caller would.
PyObject* cache_utf8(PyObject*, PyObject* arg) {
  if (PyUnicode_AsUTF8(arg) == nullptr) return nullptr;
  Py_RETURN_NONE;
}

// Test helper: records a number the script worked out, for a test to check.
PyObject* note(PyObject*, PyObject* args) {
  const char* name = nullptr;
  long value = 0;
  if (!PyArg_ParseTuple(args, "sl", &name, &value)) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_notes[name] = value;
  Py_RETURN_NONE;
}

PyMethodDef g_methods[] = {{"probe", probe, METH_O, "record the caller's frames as python_frames_read sees them"},
                           {"note", note, METH_VARARGS, "record a number for the tests"},
                           {"cache_utf8", cache_utf8, METH_O, "cache the UTF-8 form of a str"},
                           {nullptr, nullptr, 0, nullptr}};
PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "_mtprobe", nullptr, -1, g_methods};
PyObject* init_probe_module() { return PyModule_Create(&g_module); }

const Capture* find_capture(const std::string& label) {
  for (const Capture& c : g_captures) {
    if (c.label == label) return &c;
  }
  return nullptr;
}

// Line `line` (1-based) of `path`, "" when missing.
std::string source_line(const std::string& path, uint32_t line) {
  std::ifstream in(path);
  std::string text;
  for (uint32_t i = 0; i < line && std::getline(in, text); ++i) {
  }
  return text;
}

void expect_frames(const char* label, const std::vector<Frame>& expected) {
  SCOPED_TRACE(label);
  const Capture* c = find_capture(label);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->frame_count, static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_EQ(c->frames[i].file, expected[i].file);
    EXPECT_EQ(c->frames[i].function, expected[i].function);
    EXPECT_EQ(c->frames[i].line, expected[i].line);
    EXPECT_EQ(c->frames[i].ends_eval_call, expected[i].ends_eval_call);
    EXPECT_TRUE(c->frames[i].key_matches);
  }
}

constexpr const char* kScript = "probe_script.py";

// The frames of `label` are `expected`, and the read resolved `resolved` of them itself (the rest came from the
// thread's walk memo).
void expect_frames_resolving(const char* label, const std::vector<Frame>& expected, int resolved) {
  expect_frames(label, expected);
  const Capture* c = find_capture(label);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->resolved, resolved) << label;
}

TEST(PythonFrames, DetectsTheLinkedVersion) {
  // Python is linked in, so init succeeds even before Py_Initialize, and a read then finds no thread state.
  EXPECT_EQ(g_support_before_init, PythonSupport::kSupported) << python_frames_unsupported_reason();
  EXPECT_EQ(g_hex_version, static_cast<uint32_t>(PY_VERSION_HEX));
  EXPECT_STREQ(python_frames_unsupported_reason(), "");
  EXPECT_EQ(g_frames_before_init, 0);
}

// Innermost first. leaf, Model.forward and key_of are Python-to-Python calls run inline by one eval-loop
// call, which the lambda started (sorted() calls its key through C); the generator numbers() runs in its
// own eval-loop call (resumed by the builtin next()), main() inline in the module's.
TEST(PythonFrames, NestedCallsThroughBuiltinsAndAGenerator) {
  expect_frames("nested", {{kScript, "leaf", 9, false},
                           {kScript, "Model.forward", 15, false},
                           {kScript, "key_of", 19, false},
                           {kScript, "numbers.<locals>.<lambda>", 23, true},
                           {kScript, "numbers", 23, true},
                           {kScript, "main", 28, false},
                           {kScript, "<module>", 45, true}});
}

// Each frame that ends an eval-loop call has one _PyEval_EvalFrameDefault activation on the native stack:
// 3 here (lambda, numbers, <module>).
TEST(PythonFrames, EvalPcsMatchEvalCallMarks) {
  const Capture* c = find_capture("nested");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->eval_pcs, 3);
  EXPECT_FALSE(python_is_eval_pc(0));
}

// A threading.Thread: Worker.run is called inline from Thread._bootstrap_inner, itself inline from
// Thread._bootstrap, which the thread's C start routine runs (the one eval-loop call).
TEST(PythonFrames, SecondPythonThread) {
  const Capture* c = find_capture("thread");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->frame_count, 4);
  EXPECT_EQ(c->frames[0].file, kScript);
  EXPECT_EQ(c->frames[0].function, "leaf");
  EXPECT_EQ(c->frames[0].line, 9u);
  EXPECT_FALSE(c->frames[0].ends_eval_call);
  EXPECT_EQ(c->frames[1].file, kScript);
  EXPECT_EQ(c->frames[1].function, "Worker.run");
  EXPECT_EQ(c->frames[1].line, 33u);
  EXPECT_FALSE(c->frames[1].ends_eval_call);
  // threading.py's line numbers differ per version: check that each names the call's source line.
  const std::string threading_py = c->frames[2].file;
  EXPECT_TRUE(threading_py.ends_with("/threading.py")) << threading_py;
  EXPECT_EQ(c->frames[2].function, "Thread._bootstrap_inner");
  EXPECT_NE(source_line(threading_py, c->frames[2].line).find("self.run()"), std::string::npos);
  EXPECT_FALSE(c->frames[2].ends_eval_call);
  EXPECT_EQ(c->frames[3].file, threading_py);
  EXPECT_EQ(c->frames[3].function, "Thread._bootstrap");
  EXPECT_NE(source_line(threading_py, c->frames[3].line).find("self._bootstrap_inner()"), std::string::npos);
  EXPECT_TRUE(c->frames[3].ends_eval_call);
}

// "größe" is not ASCII: its text is only readable once CPython has cached its UTF-8 form.
TEST(PythonFrames, NonAsciiNamesNeedTheCachedUtf8) {
  expect_frames("non-ascii-uncached", {{kScript, "?", 37, false}, {kScript, "<module>", 49, true}});
  expect_frames("non-ascii-cached", {{kScript,
                                      "gr\xC3\xB6\xC3\x9F"
                                      "e",
                                      37, false},
                                     {kScript, "<module>", 51, true}});
}

// The read keeps the innermost 64 frames. 64 frames in all: every one kept, nothing cut, the outermost <module>.
// 65: the 64 innermost are the 64 calls of down(), <module> is left out, and the read says so.
TEST(PythonFrames, ADeeperChainThanTheRoomIsMarkedCut) {
  const Capture* fits = find_capture("depth-64");
  ASSERT_NE(fits, nullptr);
  ASSERT_EQ(fits->frame_count, 64);
  EXPECT_FALSE(fits->cut);
  EXPECT_EQ(fits->frames[0].function, "down");
  EXPECT_EQ(fits->frames[0].line, 118u);  // the probe in the innermost down()
  EXPECT_EQ(fits->frames[63].function, "<module>");
  EXPECT_EQ(fits->frames[63].line, 121u);
  const Capture* cut = find_capture("depth-65");
  ASSERT_NE(cut, nullptr);
  ASSERT_EQ(cut->frame_count, 64);
  EXPECT_TRUE(cut->cut);
  EXPECT_EQ(cut->frames[63].function, "down");
  EXPECT_EQ(cut->frames[63].line, 117u);  // the outermost down() kept, calling the next one
  EXPECT_FALSE(find_capture("module")->cut);
}

TEST(PythonFrames, ModuleLevel) { expect_frames("module", {{kScript, "<module>", 52, true}}); }

TEST(PythonFrames, ThreadWithoutPythonHasNoFrames) { expect_frames("std::thread", {}); }

// atexit callbacks run before Py_FinalizeEx marks the runtime as finalizing; module globals are cleared
// (running Finalized.__del__) after.
TEST(PythonFrames, Finalizing) {
  for (const char* label : {"nested", "thread", "module"}) {
    const Capture* c = find_capture(label);
    ASSERT_NE(c, nullptr) << label;
    EXPECT_FALSE(c->finalizing) << label;
  }
  expect_frames("atexit", {});
  EXPECT_FALSE(find_capture("atexit")->finalizing);
  expect_frames("finalizing", {{kScript, "Finalized.__del__", 42, true}});
  EXPECT_TRUE(find_capture("finalizing")->finalizing);
}

// The walk memo (python_frames.cc). The main thread's reads run in the script's order; positions count from the
// bottom of the chain (3.12+ have a C-stack shim there, below <module>; 3.11 does not: the counts are the same).
// Each expected `resolved` is the number of frames whose (frame, code, instruction) differ from the previous
// read's at the same depth.

// First read at this depth: inner_a, pick and memo_cases are new, <module> moved from line 52 to 110: 4.
// The same calls again from the loop: new activations at the same addresses, code and instructions: 0.
TEST(PythonFramesWalkMemo, TheSameStackTwiceIsReused) {
  const std::vector<Frame> frames = {{kScript, "inner_a", 59, false},
                                     {kScript, "pick", 67, false},
                                     {kScript, "memo_cases", 85, false},
                                     {kScript, "<module>", 110, true}};
  expect_frames_resolving("memo-fresh", frames, 4);
  expect_frames_resolving("memo-same", frames, 0);
}

// Only the innermost frame changes (inner_a, then inner_b in the frame inner_a had): memo_cases moved to line
// 87 (1 resolved), then inner_b replaces inner_a at the same address (1 resolved, pick and the rest reused).
TEST(PythonFramesWalkMemo, AChangedInnerFrameIsResolved) {
  expect_frames_resolving("memo-inner-before",
                          {{kScript, "inner_a", 59, false},
                           {kScript, "pick", 67, false},
                           {kScript, "memo_cases", 87, false},
                           {kScript, "<module>", 110, true}},
                          1);
  expect_frames_resolving("memo-inner-after",
                          {{kScript, "inner_b", 63, false},
                           {kScript, "pick", 67, false},
                           {kScript, "memo_cases", 87, false},
                           {kScript, "<module>", 110, true}},
                          1);
}

// An outer frame changes under unchanged inner ones: before, memo_cases moved (line 89) and outer_one, pick,
// inner_a sit one deeper than the previous read's frames (4 resolved); after, outer_two replaces outer_one at
// the same depth (1 resolved) while pick and inner_a, at the same addresses with the same code and
// instructions, are reused and still named right.
TEST(PythonFramesWalkMemo, AChangedOuterFrameIsResolved) {
  expect_frames_resolving("memo-outer-before",
                          {{kScript, "inner_a", 59, false},
                           {kScript, "pick", 67, false},
                           {kScript, "outer_one", 71, false},
                           {kScript, "memo_cases", 89, false},
                           {kScript, "<module>", 110, true}},
                          4);
  expect_frames_resolving("memo-outer-after",
                          {{kScript, "inner_a", 59, false},
                           {kScript, "pick", 67, false},
                           {kScript, "outer_two", 75, false},
                           {kScript, "memo_cases", 89, false},
                           {kScript, "<module>", 110, true}},
                          1);
}

// One activation of twice() at two instructions: the same frame and code with another instruction pointer is
// resolved again (first: twice and memo_cases at line 90, 2; second: twice alone, 1).
TEST(PythonFramesWalkMemo, TheSameFrameAtAnotherInstructionIsResolved) {
  expect_frames_resolving(
      "memo-offset-first",
      {{kScript, "twice", 79, false}, {kScript, "memo_cases", 90, false}, {kScript, "<module>", 110, true}}, 2);
  expect_frames_resolving(
      "memo-offset-second",
      {{kScript, "twice", 80, false}, {kScript, "memo_cases", 90, false}, {kScript, "<module>", 110, true}}, 1);
}

// Eight functions made from one code object with another file name each, each freed before the next is made:
// the frame of each sits where the previous one's did, at the same instruction, and CPython put the code object
// and its file name (of the same length) where the freed ones were. Each is named right and keyed by its own
// text. First read: gen, generated_cases and <module> (line 111) are new (3); then only gen's frame is
// resolved again (1): a code object at a freed one's address has another co_version.
TEST(PythonFramesWalkMemo, ACodeObjectAtAFreedOnesAddressIsResolved) {
  if (PY_VERSION_HEX < 0x030C0000)
    GTEST_SKIP() << "CPython 3.11 code objects have no co_version: one freed and another allocated at its address, "
                    "with its file name and qualified name objects also where the old ones were and of the same "
                    "lengths, is not told apart (neither by the walk memo nor by the frame cache)";
  // The case is only tested if it happened: every new code object and file name where the previous ones were.
  ASSERT_EQ(g_notes.count("memo-generated-reuses"), 1u);
  EXPECT_EQ(g_notes["memo-generated-reuses"], 7);
  for (int i = 0; i < 8; ++i) {
    std::string label = "memo-generated-" + std::to_string(i);
    std::string file = "generated_" + std::to_string(i) + ".py";
    expect_frames_resolving(label.c_str(),
                            {{file, "gen", 2, false},
                             {kScript, "generated_cases", 105, false},
                             {kScript, "<module>", 111, true}},
                            i == 0 ? 3 : 1);
  }
}

// A location table built by hand, co_firstlineno 10. Offsets are in bytes (2 per code unit).
TEST(PythonFrames, LineTableDecoding) {
  const uint8_t table[] = {
      0xE8, 0x04,                    // code 13 (no columns), 1 unit, line delta +2 (svarint 4): [0,2) -> 12
      0x81, 0x05,                    // code 0 (short form), 2 units, same line: [2,6) -> 12
      0xD8, 0x01, 0x02,              // code 11 (one-line form, delta +1), 1 unit: [6,8) -> 13
      0xF8,                          // code 15 (no location), 1 unit: [8,10) -> 0
      0xF1, 0x07, 0x00, 0x01, 0x02,  // code 14 (long form), 2 units, delta -3 (svarint 7): [10,14) -> 10
      0xE8, 0x50, 0x01,              // code 13, 1 unit, delta +40 (svarint 80 = 16 + 1*64): [14,16) -> 50
  };
  const int64_t n = sizeof table;
  EXPECT_EQ(python_line_from_table(table, n, 10, 0), 12u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 1), 12u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 2), 12u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 5), 12u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 6), 13u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 7), 13u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 8), 0u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 10), 10u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 13), 10u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 14), 50u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 15), 50u);
  EXPECT_EQ(python_line_from_table(table, n, 10, 16), 0u);   // past the table
  EXPECT_EQ(python_line_from_table(table, n, 10, -2), 10u);  // not started: co_firstlineno
  EXPECT_EQ(python_line_from_table(table, 1, 10, 0), 10u);   // truncated varint reads as delta 0
}

// Every instruction of every code object in a few stdlib modules decodes to the line CPython itself
// reports. run_python compared them; the stdlib modules hold well over 10,000 instructions.
TEST(PythonFrames, LineTableMatchesPyCodeAddr2Line) {
  EXPECT_GT(g_offsets_compared, 10000);
  EXPECT_EQ(g_line_mismatches, 0);
}

TEST(PythonFrames, DebugOffsetsRejectAWrongCookie) {
  uint64_t not_a_runtime[80] = {};
  PythonLayout layout{};
  const char* why = nullptr;
  EXPECT_FALSE(python_layout_from_debug_offsets(not_a_runtime, &layout, &why));
  EXPECT_STREQ(why, "_PyRuntime does not start with the _Py_DebugOffsets cookie \"xdebugpy\"");
}

TEST(PythonFrames, NoBuiltinTableOutside311And312) {
  PythonLayout layout{};
  EXPECT_TRUE(python_builtin_layout(11, &layout));
  EXPECT_TRUE(python_builtin_layout(12, &layout));
  EXPECT_FALSE(python_builtin_layout(10, &layout));
  EXPECT_FALSE(python_builtin_layout(13, &layout));
}

// Compares python_line_from_table with PyCode_Addr2Line at every instruction of `code` and the code
// objects nested in its constants. Needs the GIL.
void compare_lines(PyObject* code) {
  PyObject* table = PyObject_GetAttrString(code, "co_linetable");
  PyObject* instructions = PyObject_GetAttrString(code, "co_code");
  PyObject* constants = PyObject_GetAttrString(code, "co_consts");
  if (table && instructions && constants && PyBytes_Check(table) && PyBytes_Check(instructions)) {
    int first_line = reinterpret_cast<PyCodeObject*>(code)->co_firstlineno;
    auto* bytes = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(table));
    for (Py_ssize_t offset = 0; offset < PyBytes_GET_SIZE(instructions); offset += 2) {
      int expected = PyCode_Addr2Line(reinterpret_cast<PyCodeObject*>(code), static_cast<int>(offset));
      uint32_t line = python_line_from_table(bytes, PyBytes_GET_SIZE(table), first_line, offset);
      ++g_offsets_compared;
      if (line != static_cast<uint32_t>(expected < 0 ? 0 : expected)) ++g_line_mismatches;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(constants); ++i) {
      PyObject* item = PyTuple_GET_ITEM(constants, i);
      if (PyCode_Check(item)) compare_lines(item);
    }
  }
  Py_XDECREF(table);
  Py_XDECREF(instructions);
  Py_XDECREF(constants);
}

// Compiles the source of a few stdlib modules and compares the lines of all their code.
void compare_stdlib_lines() {
  for (const char* module : {"threading", "json.decoder", "inspect", "dataclasses"}) {
    PyObject* source =
        PyObject_CallMethod(PyImport_ImportModule("inspect"), "getsource", "O", PyImport_ImportModule(module));
    if (source == nullptr) {
      PyErr_Print();
      continue;
    }
    PyObject* code = Py_CompileString(PyUnicode_AsUTF8(source), module, Py_file_input);
    if (code != nullptr) compare_lines(code);
    Py_XDECREF(code);
    Py_DECREF(source);
  }
}

// Runs probe_script.py under the embedded interpreter and finalizes it, collecting g_captures.
int run_python(const char* script_path) {
  g_support_before_init = python_frames_init(&g_hex_version);
  PythonFrameView view;
  g_frames_before_init = python_frames_read(&view, 1);
  if (PyImport_AppendInittab("_mtprobe", init_probe_module) != 0) return 1;
  Py_InitializeEx(0);
  FILE* script = fopen(script_path, "rb");
  if (script == nullptr) {
    fprintf(stderr, "frames_test: cannot open %s\n", script_path);
    return 1;
  }
  // The name given here becomes co_filename, so the expected frames do not depend on the source path.
  int failed = PyRun_SimpleFileExFlags(script, kScript, 1, nullptr);
  std::thread([] { g_captures.push_back(read_frames("std::thread")); }).join();
  compare_stdlib_lines();
  if (Py_FinalizeEx() != 0) failed = 1;
  return failed;
}

}  // namespace
}  // namespace memtrace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (memtrace::run_python(MEMTRACE_PROBE_SCRIPT) != 0) {
    fprintf(stderr, "frames_test: %s failed under CPython %s\n", MEMTRACE_PROBE_SCRIPT, PY_VERSION);
    return 1;
  }
  return RUN_ALL_TESTS();
}
