#include "export/folded.h"

#include <algorithm>

#include "util/checked_math.h"

namespace memtrace {

const std::vector<uint32_t>& FoldedStackTable::stack(uint64_t stack_id) {
  auto found = stacks_.find(stack_id);
  if (found != stacks_.end()) return found->second;
  std::vector<uint32_t> indices;
  for (FoldedFrame& frame : fold_stack(resolver_.resolve(stack_id))) indices.push_back(intern(std::move(frame)));
  return stacks_.emplace(stack_id, std::move(indices)).first->second;
}

uint32_t FoldedStackTable::intern(FoldedFrame frame) {
  auto [it, inserted] = frame_index_.try_emplace({frame.label, frame.file, frame.line}, uint32_t(frames_.size()));
  if (inserted) frames_.push_back(std::move(frame));
  return it->second;
}

std::vector<std::pair<std::vector<uint32_t>, uint64_t>> largest_first(const BytesByStack& bytes) {
  std::vector<std::pair<std::vector<uint32_t>, uint64_t>> stacks;
  for (const auto& [stack, n] : bytes)
    if (n > 0) stacks.emplace_back(stack, n);
  // Stable on the map's order: ties stay ordered by their indices.
  std::stable_sort(stacks.begin(), stacks.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return stacks;
}

std::string folded_label(const std::string& label) {
  std::string safe = label;
  for (char& c : safe) {
    if (c == ';') c = ',';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return safe;
}

void write_folded(const ExportSource& source, std::ostream& out) {
  FoldedStackTable table(source.resolver());
  // One entry per (device, folded stack): call sites that fold alike (their native frames differ only in ways
  // fold_stack summarizes) are one line.
  std::map<std::string, uint64_t> bytes_by_line;
  for (const auto& [device, sites] : source.analysis().live_at_peak) {
    const std::string root = "device " + std::to_string(device);
    for (const CallSite& site : sites) {
      std::string line = root;
      for (uint32_t frame : table.stack(site.stack_id)) line += ';' + folded_label(table.frames()[frame].label);
      uint64_t& bytes = bytes_by_line[line];
      bytes = saturating_add(bytes, site.bytes);
    }
  }
  std::vector<std::pair<std::string, uint64_t>> lines;
  for (const auto& [line, bytes] : bytes_by_line)
    if (bytes > 0) lines.emplace_back(line, bytes);
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [line, bytes] : lines) out << line << ' ' << bytes << '\n';
}

}  // namespace memtrace
