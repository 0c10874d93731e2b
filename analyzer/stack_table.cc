#include "stack_table.h"

namespace memtrace {

void StackTable::add(const proto::Record& record) {
  switch (record.kind_case()) {
    case proto::Record::kModule:
      modules_.push_back(record.module());
      break;
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

const PythonSource* StackTable::python_frame(uint64_t id) const {
  auto it = python_frames_.find(id);
  return it == python_frames_.end() ? nullptr : &it->second;
}

}  // namespace memtrace
