#include "stacks/stack_table.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <utility>

namespace memtrace {
namespace {

bool all_version_characters(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

}  // namespace

// The names std::regex matched as ^(libpython[0-9.]*.*\.so.*|python[0-9.]*)$, whose '.' is any character but a
// line end: "libpython" followed by anything holding ".so" but no CR or LF, or "python" and only digits and dots.
bool is_python_interpreter_module(const std::string& basename) {
  const std::string_view name(basename);
  constexpr std::string_view kLibpython = "libpython", kPython = "python";
  if (name.substr(0, kLibpython.size()) == kLibpython) {
    const std::string_view rest = name.substr(kLibpython.size());
    return rest.find(".so") != std::string_view::npos && rest.find_first_of("\r\n") == std::string_view::npos;
  }
  return name.substr(0, kPython.size()) == kPython && all_version_characters(name.substr(kPython.size()));
}

bool cut_text(std::string* text, size_t max_bytes) {
  if (text->size() <= max_bytes) return false;
  size_t keep = max_bytes;
  // A UTF-8 character is at most 4 bytes: back over up to 3 continuation bytes to the start of the one split.
  for (int i = 0; i < 3 && keep > 0 && (static_cast<unsigned char>((*text)[keep]) & 0xC0) == 0x80; ++i) --keep;
  const size_t removed = text->size() - keep;
  text->resize(keep);
  *text += "\u2026[truncated " + std::to_string(removed) + (removed == 1 ? " byte]" : " bytes]");
  // Give the rest back: the string was copied from a record of up to 16 MiB, and what the analysis keeps
  // (modules, Python frames, notices) must hold only what is shown.
  text->shrink_to_fit();
  return true;
}

void StackTable::add(const proto::Record& record) {
  switch (record.kind_case()) {
    case proto::Record::kModule: {
      proto::Module& m = modules_.emplace_back(record.module());
      record_cuts_.strings_cut += cut_text(m.mutable_path(), kMaxModulePathBytes);
      const std::string& path = m.path();
      // Inserted at the end of the modules with this start: a module listed later at one start wins, as in the
      // Symbolizer. A tree, not a sorted vector: modules listed in descending order would be quadratic.
      const bool interpreter = is_python_interpreter_module(path.substr(path.rfind('/') + 1));
      const bool by_build_id = !m.build_id().empty();
      const ModuleIdentity& identity =
          *module_identities_.insert(ModuleIdentity{by_build_id, by_build_id ? m.build_id() : path}).first;
      module_ranges_.emplace(m.start(), ModuleRange{m.end(), m.load_address(), &identity, interpreter});
      break;
    }
    case proto::Record::kPythonFrame: {
      const auto& f = record.python_frame();
      if (python_frames_.contains(f.id())) {
        ++record_cuts_.ids_redefined;
        break;
      }
      PythonSource source{f.file(), f.function(), f.line()};
      record_cuts_.strings_cut += cut_text(&source.file, kMaxPythonTextBytes);
      record_cuts_.strings_cut += cut_text(&source.function, kMaxPythonTextBytes);
      // Ids of one source share its entry (the tracer gives a source one id; a damaged trace may give it more).
      python_frames_.emplace(f.id(), &*python_sources_.insert(std::move(source)).first);
      break;
    }
    case proto::Record::kStack: intern(record.stack()); break;
    default: break;
  }
}

void StackTable::intern(const proto::Stack& s) {
  auto [it, added] = s.id() == 0 ? std::pair{stacks_.end(), false} : stacks_.try_emplace(s.id());
  if (!added) {
    ++record_cuts_.ids_redefined;
    return;
  }
  InternedStack& stack = it->second;
  stack.cuts = StackCuts{s.native_frames_cut(), s.python_frames_cut()};
  stack.python_frames_from_backward = s.python_frames_from_backward();
  const auto& frames = s.frames();
  size_t kept = 0, native = 0, python = 0;
  for (; kept < size_t(frames.size()); ++kept) {
    const bool is_python = frames[int(kept)] & kPythonFrameBit;
    size_t& count = is_python ? python : native;
    if (count == (is_python ? kMaxPythonFramesPerStack : kMaxNativeFramesPerStack)) break;
    ++count;
  }
  stack.frames.assign(frames.begin(), frames.begin() + int(kept));
  if (kept == size_t(frames.size())) return;
  ++record_cuts_.stacks_cut;
  // Frames are missing past the last kept of each kind the stack lost.
  for (size_t i = kept; i < size_t(frames.size()); ++i) {
    if (frames[int(i)] & kPythonFrameBit) stack.cuts.python_frames_cut = true;
    else stack.cuts.native_frames_cut = true;
  }
}

void StackTable::bound(proto::TraceStart* start) {
  record_cuts_.strings_cut += cut_text(start->mutable_hostname(), kMaxHostnameBytes);
  record_cuts_.strings_cut += cut_text(start->mutable_tracer_version(), kMaxTracerVersionBytes);
  record_cuts_.strings_cut += cut_text(start->mutable_job_id(), kMaxJobIdBytes);
  auto* argv = start->mutable_argv();
  size_t room = kMaxCommandLineBytes;
  int kept = 0;
  for (; kept < argv->size(); ++kept) {
    if (kept > 0) {
      if (room == 0) break;
      --room;  // the NUL between this argument and the one before
    }
    std::string* arg = argv->Mutable(kept);
    if (cut_text(arg, room)) {
      ++record_cuts_.strings_cut;
      room = 0;
    } else {
      room -= arg->size();
    }
  }
  if (kept == argv->size()) return;
  const int more = argv->size() - kept;
  argv->DeleteSubrange(kept, more);
  argv->Add("\u2026[" + std::to_string(more) + (more == 1 ? " more argument" : " more arguments") + " truncated]");
  ++record_cuts_.strings_cut;
}

void StackTable::bound(proto::Notice* notice) {
  record_cuts_.strings_cut += cut_text(notice->mutable_message(), kMaxNoticeMessageBytes);
}

void StackTable::bound(proto::Device* device) {
  record_cuts_.strings_cut += cut_text(device->mutable_name(), kMaxDeviceNameBytes);
  constexpr size_t kUuidBytes = 16;  // CUuuid
  if (device->uuid().size() > kUuidBytes) {
    device->mutable_uuid()->resize(kUuidBytes);
    ++record_cuts_.strings_cut;
  }
}

const std::vector<uint64_t>* StackTable::frames(uint64_t stack_id) const {
  auto it = stacks_.find(stack_id);
  return it == stacks_.end() ? nullptr : &it->second.frames;
}

StackCuts StackTable::cuts(uint64_t stack_id) const {
  auto it = stacks_.find(stack_id);
  return it == stacks_.end() ? StackCuts{} : it->second.cuts;
}

bool StackTable::python_frames_from_backward(uint64_t stack_id) const {
  auto it = stacks_.find(stack_id);
  return it != stacks_.end() && it->second.python_frames_from_backward;
}

const StackTable::ModuleRange* StackTable::module_at(uint64_t address) const {
  auto it = module_ranges_.upper_bound(address);
  if (it == module_ranges_.begin()) return nullptr;
  --it;
  return address < it->second.end ? &it->second : nullptr;
}

bool StackTable::in_python_interpreter(uint64_t address) const {
  const ModuleRange* module = module_at(address);
  return module && module->python_interpreter;
}

PortableFrame StackTable::portable_frame(uint64_t raw) const {
  PortableFrame frame;
  if (raw & kPythonFrameBit) {
    const uint64_t id = raw & ~kPythonFrameBit;
    frame.source = python_frame(id);
    frame.kind = frame.source ? PortableFrame::Kind::kPython : PortableFrame::Kind::kPythonNotInTrace;
    frame.value = frame.source ? 0 : id;
    return frame;
  }
  const ModuleRange* module = module_at(raw);
  if (!module) {
    frame.kind = PortableFrame::Kind::kNativeOutsideModules;
    frame.value = raw;
    return frame;
  }
  frame.kind = PortableFrame::Kind::kNative;
  frame.module = module->identity;
  frame.value = raw - module->load_address;  // unsigned: wraps where a damaged trace puts the load address above
  return frame;
}

const PythonSource* StackTable::python_frame(uint64_t id) const {
  auto it = python_frames_.find(id);
  return it == python_frames_.end() ? nullptr : it->second;
}

size_t StackTable::IdentityHash::operator()(const ModuleIdentity& m) const {
  return std::hash<std::string>{}(m.id) ^ size_t(m.by_build_id);
}

size_t StackTable::SourceHash::operator()(const PythonSource& s) const {
  const size_t file = std::hash<std::string>{}(s.file), function = std::hash<std::string>{}(s.function);
  return file ^ (function * 0x9E3779B97F4A7C15ull) ^ (size_t(s.line) << 1);
}

}  // namespace memtrace
