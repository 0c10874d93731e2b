#include "stack_table.h"

#include <algorithm>
#include <regex>

namespace memtrace {

bool is_python_interpreter_module(const std::string& basename) {
  static const std::regex pattern(R"(^(libpython[0-9.]*.*\.so.*|python[0-9.]*)$)");
  return std::regex_match(basename, pattern);
}

void StackTable::add(const proto::Record& record) {
  switch (record.kind_case()) {
    case proto::Record::kModule: {
      const proto::Module& m = record.module();
      modules_.push_back(m);
      const std::string& path = m.path();
      ModuleRange range{m.start(), m.end(), is_python_interpreter_module(path.substr(path.rfind('/') + 1))};
      auto at = std::upper_bound(module_ranges_.begin(), module_ranges_.end(), range.start,
                                 [](uint64_t start, const ModuleRange& r) { return start < r.start; });
      module_ranges_.insert(at, range);
      break;
    }
    case proto::Record::kPythonFrame: {
      const auto& f = record.python_frame();
      python_frames_[f.id()] = PythonSource{f.file(), f.function(), f.line()};
      break;
    }
    case proto::Record::kStack: {
      const proto::Stack& s = record.stack();
      InternedStack& stack = stacks_[s.id()];
      stack.frames.assign(s.frames().begin(), s.frames().end());
      stack.cuts = StackCuts{s.native_frames_cut(), s.python_frames_cut()};
      break;
    }
    default:
      break;
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

bool StackTable::in_python_interpreter(uint64_t address) const {
  auto it = std::upper_bound(module_ranges_.begin(), module_ranges_.end(), address,
                             [](uint64_t a, const ModuleRange& r) { return a < r.start; });
  if (it == module_ranges_.begin()) return false;
  --it;
  return address < it->end && it->python_interpreter;
}

const PythonSource* StackTable::python_frame(uint64_t id) const {
  auto it = python_frames_.find(id);
  return it == python_frames_.end() ? nullptr : &it->second;
}

}  // namespace memtrace
