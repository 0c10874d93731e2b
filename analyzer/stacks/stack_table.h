// The interned records a trace refers to by id: modules, Python frames and stacks, and the portable names of their
// frames (frame_key.h). Kept for the whole analysis (their number grows with distinct call sites, not with events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "memtrace.pb.h"
#include "stacks/frame_key.h"

namespace memtrace {

// Bit 63 of a Stack frame marks a PythonFrame id; otherwise the frame is a native return address.
inline constexpr uint64_t kPythonFrameBit = 1ull << 63;

// Whether a module, by its file's basename, is the Python interpreter itself: libpython*.so* or the python
// executable. Its native frames (eval loop, call machinery) stand where the tracer spliced in the Python frames
// they ran; reports hide them (the Symbolizer sets NativeFrame.in_python_interpreter with it), and call sites
// are grouped without them (call_sites.h).
// Plain string code, linear in the name's length: a trace can name a module with a path of any length.
bool is_python_interpreter_module(const std::string& basename);

// What the tracer writes at most (preload/). A record past these was not written by it, but by a damaged or
// hostile file; the analyzer keeps what the tracer could have written and marks the rest cut, so that the time and
// memory a report takes, and the size of its output, stay bounded whatever the file holds.
// Native frames per stack: MEMTRACE_MAX_FRAMES and MEMTRACE_MAX_FRAMES_PYTHON are at most 256
// (preload/record/config.cc), the size of the capture's buffer (kMaxNativeFrames, preload/stacks/stack_capture.h).
inline constexpr size_t kMaxNativeFramesPerStack = 256;
// Python frames per stack: the innermost 128 (kMaxPythonFrames, preload/stacks/stack_capture.h).
inline constexpr size_t kMaxPythonFramesPerStack = 128;
// A Python file or function name: kMaxStringBytes, preload/stacks/python_frames.cc.
inline constexpr size_t kMaxPythonTextBytes = 4096;
// A module's path: PATH_MAX. dl_iterate_phdr names files the loader opened by path, and the main program's path
// is read into PATH_MAX bytes (preload/stacks/module_map.cc).
inline constexpr size_t kMaxModulePathBytes = 4096;
// The host name: gethostname into 256 bytes (preload/record/trace_records.cc).
inline constexpr size_t kMaxHostnameBytes = 255;
// The command line: /proc/self/cmdline read into 8192 bytes, NUL-separated (preload/record/trace_records.cc), so the
// arguments together with one separator between each two fill at most 8191 bytes (and number at most 4096).
inline constexpr size_t kMaxCommandLineBytes = 8191;
// TraceStart.tracer_version: the tracer writes "memtrace " and its version; 255 bytes is room to spare.
inline constexpr size_t kMaxTracerVersionBytes = 255;
// A notice's message: cut to 512 bytes by the tracer (append_notice_locked, preload/record/recorder.cc).
inline constexpr size_t kMaxNoticeMessageBytes = 512;
// TraceStart.job_id and Device.name: the tracer writes at most 255 bytes of each.
inline constexpr size_t kMaxJobIdBytes = 255;
inline constexpr size_t kMaxDeviceNameBytes = 255;

// Cuts `text` to its first `max_bytes` bytes (fewer where a UTF-8 character would be split) and appends
// "…[truncated N bytes]", N the bytes removed ("1 byte"). Returns whether it cut; `text` is unchanged when it fits.
bool cut_text(std::string* text, size_t max_bytes);

// What a trace held past the limits above, and how much of it was cut.
struct RecordCuts {
  uint64_t stacks_cut = 0;   // stacks with more frames than the tracer writes
  uint64_t strings_cut = 0;  // strings longer than the tracer writes (and argument lists longer than its buffer)
  // Stack and PythonFrame records whose id an earlier record of the kind already defined (the tracer never reuses
  // an id), or Stacks with id 0 (which events use for "no stack"): ignored, the first definition kept.
  uint64_t ids_redefined = 0;
};

class StackTable {
 public:
  // Takes Module, PythonFrame and Stack records; ignores every other kind. A stack with more frames than the
  // tracer writes keeps its first kMaxNativeFramesPerStack native and kMaxPythonFramesPerStack Python frames (up
  // to the first frame past either limit) and is marked cut for the kinds it lost; names and paths longer than the
  // tracer writes are cut (cut_text). Both are counted (record_cuts()).
  void add(const proto::Record& record);
  // Cuts the strings of a TraceStart, a Notice or a Device the analysis keeps to what the tracer writes
  // (hostname, argv, tracer_version, job_id; the message; the name and 16 bytes of uuid), counting them in
  // record_cuts(). An argument list longer than the tracer's
  // buffer keeps the arguments that fit, the last of them cut, and ends with one entry
  // "…[N more arguments truncated]" ("argument" for one).
  void bound(proto::TraceStart* start);
  void bound(proto::Notice* notice);
  void bound(proto::Device* device);
  const RecordCuts& record_cuts() const { return record_cuts_; }

  // Frames innermost first, or nullptr for an unknown id (0 = no stack).
  const std::vector<uint64_t>* frames(uint64_t stack_id) const;
  // The cut marks of a stack; none for an unknown id.
  StackCuts cuts(uint64_t stack_id) const;
  // Whether the stack's Python frames are those of the thread that was waiting in PyTorch's backward, not the
  // allocating thread's own (Stack.python_frames_from_backward); false for an unknown id.
  bool python_frames_from_backward(uint64_t stack_id) const;
  const PythonSource* python_frame(uint64_t id) const;
  const std::vector<proto::Module>& modules() const { return modules_; }
  // Whether a native return address lies in one of the interpreter's modules (is_python_interpreter_module),
  // found as the Symbolizer finds a module: the one with the highest start at or below the address, if the
  // address is below its end. Without the debug info the Symbolizer reads: a lookup among the modules only.
  bool in_python_interpreter(uint64_t address) const;
  // The portable name of a Stack frame (a raw value: a native return address, or kPythonFrameBit | a PythonFrame
  // id): a native address in the module found as in_python_interpreter finds it is that module's identity and
  // the address - its load address (modulo 2^64, as the Symbolizer's module_offset); an address in no module, or
  // a Python id the trace never defined, keeps its raw value (PortableFrame::Kind). The frame points into this
  // table, valid while it lives. One module lookup: O(log modules).
  PortableFrame portable_frame(uint64_t raw) const;

 private:
  struct ModuleRange {
    uint64_t end = 0;
    uint64_t load_address = 0;
    const ModuleIdentity* identity = nullptr;
    bool python_interpreter = false;
  };
  // The module an address lies in, as in_python_interpreter() finds it; nullptr for none.
  const ModuleRange* module_at(uint64_t address) const;
  void intern(const proto::Stack& stack);
  struct IdentityHash {
    size_t operator()(const ModuleIdentity& m) const;
  };
  struct SourceHash {
    size_t operator()(const PythonSource& s) const;
  };
  std::vector<proto::Module> modules_;
  // By start; among modules with one start, the one added last is found (it comes last in the multimap).
  std::multimap<uint64_t, ModuleRange> module_ranges_;
  // One entry per distinct identity and per distinct source: PortableFrames point to them, and compare by
  // pointer within this table (SameTableLess). Node-based sets, so that the pointers stay valid as they grow.
  std::unordered_set<ModuleIdentity, IdentityHash> module_identities_;
  std::unordered_set<PythonSource, SourceHash> python_sources_;
  std::unordered_map<uint64_t, const PythonSource*> python_frames_;
  struct InternedStack {
    std::vector<uint64_t> frames;
    StackCuts cuts;
    bool python_frames_from_backward = false;
  };
  std::unordered_map<uint64_t, InternedStack> stacks_;
  RecordCuts record_cuts_;
};

}  // namespace memtrace
