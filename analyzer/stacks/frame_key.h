// Frames and call sites named so that two traces of one program name them alike, for comparing and merging traces:
// a native frame by its module and its offset in it rather than by its absolute address (load addresses move from
// run to run with ASLR), a Python frame by its source position rather than by its PythonFrame id (ids are a trace's
// own). Inside one trace a key names exactly what the raw frame names: an address lies in one module at one offset,
// and the tracer gives each source position one id.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

namespace memtrace {

// Where the tracer cut a stack short (Stack.native_frames_cut / python_frames_cut): frames are missing past its
// last native frame, or past its last (outermost kept) Python frame. Both false in traces of tracers that did
// not mark cuts.
struct StackCuts {
  bool native_frames_cut = false;
  bool python_frames_cut = false;
  auto operator<=>(const StackCuts&) const = default;
};

struct PythonSource {
  std::string file;
  std::string function;  // the code object's qualified name
  uint32_t line = 0;
  auto operator<=>(const PythonSource&) const = default;
};

// A module as every run of a program names it: its build id where it has one (the same file, wherever it was
// loaded from), else its path.
struct ModuleIdentity {
  bool by_build_id = false;
  std::string id;  // the build id's bytes (Module.build_id), or the path (cut as StackTable cuts module paths)
  auto operator<=>(const ModuleIdentity&) const = default;
};

// One frame of a stack, portably. The module and source point into the StackTable that made the frame (they live
// as long as it does); comparisons (==, <=>) read what they point to, so frames of two tables compare by content.
struct PortableFrame {
  enum class Kind : uint8_t {
    kNative,  // `module` and `value` = the return address - the module's load address
    kPython,  // `source`
    // A return address in no module of the trace: `value` = the address as the trace wrote it. Without a
    // module there is nothing portable to name it by; two traces agree on it only where the address did not move.
    kNativeOutsideModules,
    // A PythonFrame id the trace never defined: `value` = the id. Equal across traces only by chance.
    kPythonNotInTrace,
  };
  Kind kind = Kind::kNativeOutsideModules;
  const ModuleIdentity* module = nullptr;
  const PythonSource* source = nullptr;
  uint64_t value = 0;
};

// By content: kind, then the module's identity and the offset, or the source (file, function, line), or the value.
std::strong_ordering operator<=>(const PortableFrame& a, const PortableFrame& b);
bool operator==(const PortableFrame& a, const PortableFrame& b);

// A call site, portably: the frames that tell it from other sites (SiteGrouping's: the stack as the reports show
// it), innermost first, the stack's cut marks, and whether its Python frames were borrowed from the thread waiting
// in backward (Stack.python_frames_from_backward): an allocation of the backward pass on an autograd thread and one
// made by the waiting thread itself under the same frames are two sites.
struct PortableSiteKey {
  std::vector<PortableFrame> frames;
  StackCuts cuts;
  bool python_frames_from_backward = false;
  auto operator<=>(const PortableSiteKey&) const = default;
};

// Orders keys of ONE StackTable by the addresses of what their frames point to, not by content: the table holds one
// ModuleIdentity per identity and one PythonSource per source, so that equal content is an equal pointer there.
// Constant time per frame, where content compares read strings of up to 4 KiB (or a build id of any length).
struct SameTableLess {
  bool operator()(const PortableSiteKey& a, const PortableSiteKey& b) const;
};

}  // namespace memtrace
