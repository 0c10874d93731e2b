// `memtrace export --format folded`: the bytes live at each device's peak allocated as Brendan Gregg's folded
// stacks, the input of flamegraph.pl and inferno-flamegraph (docs/commands/export.md, folded). One line per
// distinct stack, root first, frames joined by ';', then one space and the bytes (a decimal integer):
//   device 0;train.py:41 main;model.py:12 forward;native: aten::mm -> PyTorch caching allocator 8388608
// The first frame is the device ("device 0"; "device -1": unknown): each device at its own peak, the moment
// `memtrace peak` reports, with what was live then of the allocated kind (the call sites of `memtrace summary`'s
// "live at peak"). The other frames are stacks/folded_stack.h's fold_stack, as every stack-shaped export folds
// them. Labels are the traced program's text made safe for the format: ';' becomes ',' and each control character
// (U+0000-U+001F, U+007F: newlines, tabs) a space. Lines: largest bytes first, ties in byte order of the line;
// stacks of 0 bytes are left out.
// Also here, for every stack-shaped export: FoldedStackTable, each stack id folded once and each frame kept once.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "export/export_source.h"
#include "stacks/folded_stack.h"

namespace memtrace {

// The folded frames of one export, each distinct (label, file, line) once, in order of first use, and the
// folded stack of each stack id asked about, as indices into them. Memory: the distinct frames and stacks.
class FoldedStackTable {
 public:
  explicit FoldedStackTable(FrameResolver& resolver) : resolver_(resolver) {}
  // The frames of `stack_id` folded (fold_stack), root first, as indices into frames(); never empty. Resolved
  // and folded on the first call for the id.
  const std::vector<uint32_t>& stack(uint64_t stack_id);
  const std::vector<FoldedFrame>& frames() const { return frames_; }

 private:
  uint32_t intern(FoldedFrame frame);
  FrameResolver& resolver_;
  std::vector<FoldedFrame> frames_;
  std::map<std::tuple<std::string, std::string, uint32_t>, uint32_t> frame_index_;  // (label, file, line)
  std::unordered_map<uint64_t, std::vector<uint32_t>> stacks_;
};

// Bytes per distinct folded stack (indices into a FoldedStackTable's frames, root first).
using BytesByStack = std::map<std::vector<uint32_t>, uint64_t>;

// `bytes` in the order the exports list stacks: largest first, ties by the stacks' indices; 0-byte stacks left out.
std::vector<std::pair<std::vector<uint32_t>, uint64_t>> largest_first(const BytesByStack& bytes);

// `label` with ';' as ',' and each control character (U+0000-U+001F, U+007F) as a space: one folded frame.
std::string folded_label(const std::string& label);

// Writes the lines described above, from the first pass's live-at-peak call sites (no further read of the trace).
void write_folded(const ExportSource& source, std::ostream& out);

}  // namespace memtrace
