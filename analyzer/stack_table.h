// The interned records a trace refers to by id: modules, Python frames and stacks. Kept for the whole
// analysis (their number grows with distinct call sites, not with events).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "memtrace.pb.h"

namespace memtrace {

// Bit 63 of a Stack frame marks a PythonFrame id; otherwise the frame is a native return address.
inline constexpr uint64_t kPythonFrameBit = 1ull << 63;

// Where the tracer cut a stack short (Stack.native_frames_cut / python_frames_cut): frames are missing past its
// last native frame, or past its last (outermost kept) Python frame. Both false in traces of tracers that did
// not mark cuts.
struct StackCuts {
  bool native_frames_cut = false;
  bool python_frames_cut = false;
  auto operator<=>(const StackCuts&) const = default;
};

// Whether a module, by its file's basename, is the Python interpreter itself: libpython*.so* or the python
// executable. Its native frames (eval loop, call machinery) stand where the tracer spliced in the Python frames
// they ran; reports hide them (the Symbolizer sets NativeFrame.in_python_interpreter with it), and call sites
// are grouped without them (call_sites.h).
bool is_python_interpreter_module(const std::string& basename);

struct PythonSource {
  std::string file;
  std::string function;  // the code object's qualified name
  uint32_t line = 0;
};

class StackTable {
 public:
  // Takes Module, PythonFrame and Stack records; ignores every other kind.
  void add(const proto::Record& record);

  // Frames innermost first, or nullptr for an unknown id (0 = no stack).
  const std::vector<uint64_t>* frames(uint64_t stack_id) const;
  // The cut marks of a stack; none for an unknown id.
  StackCuts cuts(uint64_t stack_id) const;
  const PythonSource* python_frame(uint64_t id) const;
  const std::vector<proto::Module>& modules() const { return modules_; }
  // Whether a native return address lies in one of the interpreter's modules (is_python_interpreter_module),
  // found as the Symbolizer finds a module: the one with the highest start at or below the address, if the
  // address is below its end. Without the debug info the Symbolizer reads: a lookup among the modules only.
  bool in_python_interpreter(uint64_t address) const;

 private:
  std::vector<proto::Module> modules_;
  struct ModuleRange {
    uint64_t start = 0;
    uint64_t end = 0;
    bool python_interpreter = false;
  };
  std::vector<ModuleRange> module_ranges_;  // sorted by start
  std::unordered_map<uint64_t, PythonSource> python_frames_;
  struct InternedStack {
    std::vector<uint64_t> frames;
    StackCuts cuts;
  };
  std::unordered_map<uint64_t, InternedStack> stacks_;
};

}  // namespace memtrace
