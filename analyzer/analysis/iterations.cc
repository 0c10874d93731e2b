#include "analysis/iterations.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <utility>

#include "model/replay.h"
#include "read/trace_reader.h"
#include "stacks/frame_roles.h"
#include "util/checked_math.h"

namespace memtrace {

EventOrigins collect_event_origins(const std::string& path) {
  EventOrigins events;
  std::unordered_map<uint64_t, uint32_t> index_of_stack = {{0, 0}};
  int64_t now_ns = 0;
  auto on_event = [&](const EventFields& e) {
    now_ns = saturating_add(now_ns, e.time_delta_ns());  // as MemoryModel keeps its clock
    auto [it, added] = index_of_stack.emplace(e.stack_id(), uint32_t(events.stack_ids.size()));
    if (added) events.stack_ids.push_back(e.stack_id());
    if (e.kind() == proto::PYTHON_FINALIZING) events.finalizing.push_back(events.size());
    events.time_ns.push_back(now_ns);
    events.stack.push_back(it->second);
  };
  read_trace(path, SinkOf{on_event, ignore_record});
  return events;
}

namespace {

struct PyFrame {
  std::string file;
  std::string function;
  uint32_t line = 0;
};

// What the analysis needs of one stack, read once per stack id.
struct StackShape {
  std::vector<PyFrame> python;  // outermost first
  bool backward = false;        // torch's backward, by Python or native frames
  bool optimizer = false;       // under torch/optim/ or in a zero_grad
  size_t chain_match = 0;       // how many of its outermost frames match the majority chain (file, function)
};

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_backward_python_frame(const Frame& f) {
  if (ends_with(f.file, "torch/autograd/graph.py")) return f.function == "_engine_run_backward";
  if (ends_with(f.file, "torch/autograd/__init__.py")) return f.function == "backward" || f.function == "grad";
  return false;
}

bool is_optimizer_python_frame(const Frame& f) {
  return f.file.find("/torch/optim/") != std::string::npos || ends_with(f.function, "zero_grad");
}

bool is_autograd_native_frame(const Frame& f) {
  return f.function.find("torch::autograd::Engine") != std::string::npos || autograd_node(f.function).has_value();
}

// A stack's shape from its Python frames; its native frames are symbolized (the costly part) only for a stack
// without Python frames, where they are the one sign of the autograd worker thread.
StackShape shape_of(uint64_t stack_id, const StackTable& stacks, FrameResolver& resolver) {
  StackShape shape;
  const std::vector<uint64_t>* raw = stacks.frames(stack_id);
  if (!raw) return shape;
  for (auto it = raw->rbegin(); it != raw->rend(); ++it) {
    if (!(*it & kPythonFrameBit)) continue;
    const PythonSource* source = stacks.python_frame(*it & ~kPythonFrameBit);
    if (!source) continue;
    Frame f;
    f.python = true;
    f.file = source->file;
    f.function = source->function;
    f.line = source->line;
    shape.backward = shape.backward || is_backward_python_frame(f);
    shape.optimizer = shape.optimizer || is_optimizer_python_frame(f);
    shape.python.push_back(PyFrame{std::move(f.file), std::move(f.function), f.line});
  }
  if (shape.python.empty())
    for (const Frame& f : resolver.resolve(stack_id).frames)
      shape.backward = shape.backward || is_autograd_native_frame(f);
  return shape;
}

// Every distinct stack's shape, by its index in EventOrigins::stack_ids (index 0, no stack: no frames).
class Shapes {
 public:
  Shapes(const EventOrigins& events, const StackTable& stacks, FrameResolver& resolver) {
    shapes_.reserve(events.stack_ids.size());
    for (uint64_t id : events.stack_ids) shapes_.push_back(id ? shape_of(id, stacks, resolver) : StackShape{});
  }
  StackShape& of(uint32_t index) { return shapes_[index]; }
  size_t size() const { return shapes_.size(); }

 private:
  std::vector<StackShape> shapes_;
};

bool same_chain(const std::vector<PyFrame>& a, const std::vector<PyFrame>& b, size_t depth) {
  if (a.size() <= depth || b.size() <= depth) return false;
  for (size_t d = 0; d <= depth; ++d)
    if (a[d].file != b[d].file || a[d].function != b[d].function) return false;
  return true;
}

// The majority chain: for each depth, the (file, function) chain down to it shared by more than half of the
// events with Python frames, as the frames of one representative stack (empty when none).
std::vector<PyFrame> majority_chain(const EventOrigins& events, Shapes& shapes) {
  std::vector<uint64_t> events_of_stack(shapes.size(), 0);
  for (uint32_t s : events.stack) ++events_of_stack[s];
  uint64_t with_python = 0;
  std::vector<std::pair<const StackShape*, uint64_t>> stacks;
  for (uint32_t index = 0; index < shapes.size(); ++index) {
    const StackShape& s = shapes.of(index);
    if (s.python.empty() || events_of_stack[index] == 0) continue;
    with_python += events_of_stack[index];
    stacks.emplace_back(&s, events_of_stack[index]);
  }
  std::vector<PyFrame> chain;
  for (size_t depth = 0;; ++depth) {
    // Boyer-Moore majority vote over the stacks' prefixes at this depth, then a count to confirm it.
    const StackShape* candidate = nullptr;
    uint64_t votes = 0;
    for (const auto& [s, count] : stacks) {
      if (s->python.size() <= depth) continue;
      if (votes == 0) {
        candidate = s;
        votes = count;
      } else if (same_chain(s->python, candidate->python, depth)) {
        votes += count;
      } else {
        votes -= std::min(votes, count);
      }
    }
    if (!candidate) return chain;
    uint64_t holding = 0;
    for (const auto& [s, count] : stacks)
      if (same_chain(s->python, candidate->python, depth)) holding += count;
    if (holding * 2 <= with_python) return chain;
    chain.push_back(candidate->python[depth]);
  }
}

// Sets every stack's chain_match: O(stacks x chain length).
void match_chain(Shapes& shapes, const std::vector<PyFrame>& chain) {
  for (uint32_t index = 0; index < shapes.size(); ++index) {
    StackShape& s = shapes.of(index);
    size_t d = 0;
    while (d < chain.size() && d < s.python.size() && s.python[d].file == chain[d].file &&
           s.python[d].function == chain[d].function)
      ++d;
    s.chain_match = d;
  }
}

// Whether the stack has the majority chain's frames down to `depth` (match_chain first).
bool has_prefix(const StackShape& s, size_t depth) { return s.chain_match > depth; }

// Whether the stacks holding the chain down to `depth` show 2 or more lines in that frame: a frame whose line
// never varies holds no loop, and needs no scan of the events.
bool line_varies(Shapes& shapes, size_t depth) {
  std::optional<uint32_t> first;
  for (uint32_t index = 0; index < shapes.size(); ++index) {
    const StackShape& s = shapes.of(index);
    if (!has_prefix(s, depth)) continue;
    if (first && *first != s.python[depth].line) return true;
    first = s.python[depth].line;
  }
  return false;
}

struct LoopFound {
  size_t depth = 0;
  uint32_t start_line = 0;
  std::vector<uint64_t> starts;   // first events of the iterations
  std::vector<uint64_t> anchors;  // every event in the loop frame
};

// The iterations of the loop in frame `depth` of `chain` (LoopFound::starts empty when it has fewer than 2).
LoopFound loop_at(const EventOrigins& events, Shapes& shapes, size_t depth) {
  LoopFound loop;
  loop.depth = depth;
  std::vector<uint32_t> lines;
  std::map<uint32_t, uint32_t> runs;
  for (uint64_t i = 0; i < events.size(); ++i) {
    const StackShape& s = shapes.of(events.stack[i]);
    if (!has_prefix(s, depth)) continue;
    uint32_t line = s.python[depth].line;
    if (lines.empty() || lines.back() != line) ++runs[line];
    loop.anchors.push_back(i);
    lines.push_back(line);
  }
  auto body = std::find_if(runs.begin(), runs.end(), [](const auto& r) { return r.second >= 2; });
  if (body == runs.end()) return loop;
  loop.start_line = body->first;
  for (size_t k = 0; k < lines.size(); ++k)
    if (lines[k] == loop.start_line && (k == 0 || lines[k - 1] != loop.start_line))
      loop.starts.push_back(loop.anchors[k]);
  if (loop.starts.size() < 2) loop.starts.clear();
  return loop;
}

uint64_t median_low(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + (values.size() - 1) / 2, values.end());
  return values[(values.size() - 1) / 2];
}

// The iteration spans of a Python loop (see the design comment, step 2: where the last one ends).
std::vector<IterationSpan> python_loop_spans(const EventOrigins& events, Shapes& shapes, const LoopFound& loop) {
  std::vector<IterationSpan> spans;
  std::vector<uint64_t> tails;  // events after each iteration's last event in the loop frame
  size_t a = 0;
  for (size_t k = 0; k + 1 < loop.starts.size(); ++k) {
    spans.push_back(IterationSpan{loop.starts[k], loop.starts[k + 1]});
    while (a + 1 < loop.anchors.size() && loop.anchors[a + 1] < loop.starts[k + 1]) ++a;
    tails.push_back(loop.starts[k + 1] - loop.anchors[a] - 1);
  }
  uint64_t last_anchor = loop.anchors.back();
  uint64_t end = std::min<uint64_t>(events.size(), last_anchor + 1 + median_low(tails));
  auto finalizing = std::upper_bound(events.finalizing.begin(), events.finalizing.end(), last_anchor);
  if (finalizing != events.finalizing.end()) end = std::min(end, *finalizing);
  for (uint64_t i = last_anchor + 1; i < end; ++i) {
    const StackShape& s = shapes.of(events.stack[i]);
    if (!s.python.empty() && !has_prefix(s, loop.depth)) {  // its Python frames have left the loop
      end = i;
      break;
    }
  }
  spans.push_back(IterationSpan{loop.starts.back(), end});
  return spans;
}

// The phase a nested NVTX range's name gives, or kOutside for none.
Phase phase_of_range_name(const std::string& name, bool nested) {
  std::string lower;
  for (char c : name) lower.push_back(char(std::tolower(static_cast<unsigned char>(c))));
  auto has = [&](std::string_view word) { return lower.find(word) != std::string::npos; };
  if (has("backward") || has("bwd")) return Phase::kBackward;
  if (has("forward") || has("fwd")) return Phase::kForward;
  if (has("optim") || (nested && has("step"))) return Phase::kOptimizer;
  return Phase::kOutside;
}

// The NVTX ranges that are the iterations (the design comment, step 1): indices into `nvtx`, by first event.
std::vector<size_t> nvtx_iteration_ranges(const std::vector<NvtxRange>& nvtx) {
  std::map<std::tuple<uint32_t, std::string, uint32_t>, std::vector<size_t>> groups;  // (depth, name, tid)
  for (size_t i = 0; i < nvtx.size(); ++i)
    if (!nvtx[i].name.empty() && phase_of_range_name(nvtx[i].name, false) == Phase::kOutside)
      groups[{nvtx[i].depth, nvtx[i].name, nvtx[i].tid}].push_back(i);
  const std::vector<size_t>* best = nullptr;
  uint32_t best_depth = 0;
  for (const auto& [key, ranges] : groups) {
    if (ranges.size() < 2) continue;
    if (!best || std::get<0>(key) < best_depth || (std::get<0>(key) == best_depth && ranges.size() > best->size())) {
      best = &ranges;
      best_depth = std::get<0>(key);
    }
  }
  if (!best) return {};
  std::vector<size_t> chosen = *best;
  std::sort(chosen.begin(), chosen.end(),
            [&](size_t a, size_t b) { return nvtx[a].first_event < nvtx[b].first_event; });
  return chosen;
}

// Frame-based phases of the events of one iteration (the design comment, step 3).
void assign_phases(const EventOrigins& events, Shapes& shapes, const IterationSpan& span,
                   std::vector<Phase>& phase_of_event) {
  bool backward_seen = false;
  Phase in_effect = Phase::kForward;
  for (uint64_t i = span.first_event; i < span.end_event; ++i) {
    const StackShape& s = shapes.of(events.stack[i]);
    Phase phase = in_effect;
    if (s.backward) {
      phase = Phase::kBackward;
      backward_seen = true;
    } else if (s.optimizer) {
      phase = Phase::kOptimizer;
    } else if (!s.python.empty()) {
      phase = backward_seen ? Phase::kOther : Phase::kForward;
    }
    phase_of_event[i] = in_effect = phase;
  }
}

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int64_t time_at(const EventOrigins& events, uint64_t index) {
  if (index < events.size()) return events.time_ns[index];
  return events.time_ns.empty() ? 0 : events.time_ns.back();
}

}  // namespace

EventPhases find_iterations(const EventOrigins& events, const StackTable& stacks, FrameResolver& resolver,
                            const std::vector<NvtxRange>& nvtx) {
  EventPhases phases;
  Shapes shapes(events, stacks, resolver);
  std::vector<size_t> ranges = nvtx_iteration_ranges(nvtx);
  if (!ranges.empty()) {
    phases.source = IterationSource::kNvtx;
    phases.range_name = nvtx[ranges.front()].name;
    uint64_t previous_end = 0;
    for (size_t r : ranges) {
      uint64_t first = std::max(nvtx[r].first_event, previous_end);
      uint64_t end = std::min<uint64_t>(nvtx[r].end_event, events.size());
      if (first >= end) continue;  // empty or overlapping the one before: not a separate iteration
      phases.iterations.push_back(IterationSpan{first, end});
      previous_end = end;
    }
  } else {
    std::vector<PyFrame> chain = majority_chain(events, shapes);
    match_chain(shapes, chain);
    size_t tried = 0;
    for (size_t depth = 0; depth < chain.size() && tried < kMaxLoopFramesTried; ++depth) {
      if (python_source_kind(chain[depth].file) != SourceKind::kUser || !line_varies(shapes, depth)) continue;
      ++tried;
      LoopFound loop = loop_at(events, shapes, depth);
      if (loop.starts.empty()) continue;
      phases.source = IterationSource::kPythonLoop;
      phases.loop_file = chain[depth].file;
      phases.loop_function = chain[depth].function;
      phases.loop_line = loop.start_line;
      phases.iterations = python_loop_spans(events, shapes, loop);
      break;
    }
  }
  if (phases.iterations.size() < 2) return EventPhases{};

  phases.iteration_of_event.assign(events.size(), -1);
  phases.phase_of_event.assign(events.size(), Phase::kOutside);
  for (size_t k = 0; k < phases.iterations.size(); ++k) {
    IterationSpan& span = phases.iterations[k];
    span.begin_ns = time_at(events, span.first_event);
    span.end_ns = time_at(events, span.end_event);
    std::fill(phases.iteration_of_event.begin() + int64_t(span.first_event),
              phases.iteration_of_event.begin() + int64_t(span.end_event), int32_t(k));
    assign_phases(events, shapes, span, phases.phase_of_event);
  }
  if (phases.source == IterationSource::kNvtx) {
    // Nested ranges named like phases, deeper than the iterations' on their thread, override the frames' phases.
    uint32_t depth = nvtx[ranges.front()].depth, tid = nvtx[ranges.front()].tid;
    for (const NvtxRange& r : nvtx) {
      if (r.tid != tid || r.depth <= depth) continue;
      Phase phase = phase_of_range_name(r.name, true);
      if (phase == Phase::kOutside) continue;
      for (uint64_t i = r.first_event; i < std::min<uint64_t>(r.end_event, events.size()); ++i)
        if (phases.iteration_of_event[i] >= 0) phases.phase_of_event[i] = phase;
    }
  }
  return phases;
}

IterationFigures measure_iterations(const std::string& path, const std::map<int32_t, LayerHint>& hints,
                                    const EventPhases& phases, int32_t device) {
  IterationFigures figures;
  figures.device = device;
  if (phases.iterations.empty()) return figures;
  figures.iterations.resize(phases.iterations.size());
  struct Observer {
    const EventPhases& phases;
    MemoryModel& model;
    IterationFigures& figures;
    uint64_t index = 0;
    void keep_live() {
      model.visit_allocated(figures.device, [&](const LiveAllocation& a) {
        if (a.event_index >= phases.iteration_of_event.size() || phases.iteration_of_event[a.event_index] < 0) return;
        figures.kept_at_last_end.push_back(KeptAllocation{a.stack_id, a.size_bytes,
                                                          uint32_t(phases.iteration_of_event[a.event_index]),
                                                          phases.phase_of_event[a.event_index]});
      });
    }
    ReplayStep after_event(const EventFields&) {
      uint64_t i = index++;
      int32_t k = i < phases.iteration_of_event.size() ? phases.iteration_of_event[i] : -1;
      if (k < 0) return i + 1 < phases.iterations.back().end_event ? ReplayStep::kGoOn : ReplayStep::kStop;
      IterationMemory& m = figures.iterations[size_t(k)];
      DeviceTotals totals = model.totals(figures.device);
      if (i == phases.iterations[size_t(k)].first_event || totals.allocated_bytes > m.peak_allocated_bytes) {
        m.peak_allocated_bytes = totals.allocated_bytes;
        m.peak_phase = phases.phase_of_event[i];
        m.peak_event = i;
      }
      if (i + 1 == phases.iterations[size_t(k)].end_event) {
        m.allocated_at_end_bytes = totals.allocated_bytes;
        m.reserved_at_end_bytes = totals.reserved_bytes;
        if (size_t(k) + 1 == phases.iterations.size()) keep_live();
      }
      return i + 1 < phases.iterations.back().end_event ? ReplayStep::kGoOn : ReplayStep::kStop;
    }
  };
  MemoryModel model;
  Observer observer{phases, model, figures};
  replay_trace(path, hints, model, observer);
  std::vector<uint64_t> allocated, reserved;
  for (const IterationMemory& m : figures.iterations) {
    allocated.push_back(m.allocated_at_end_bytes);
    reserved.push_back(m.reserved_at_end_bytes);
  }
  figures.allocated_growth_per_iteration_bytes = steady_growth(allocated);
  figures.reserved_growth_per_iteration_bytes = steady_growth(reserved);
  return figures;
}

namespace {
int64_t median_rounded_toward_zero(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  if (n % 2) return values[n / 2];
  return int64_t((__int128(values[n / 2 - 1]) + values[n / 2]) / 2);  // C++ division rounds toward zero
}
}  // namespace

std::optional<int64_t> steady_growth(const std::vector<uint64_t>& at_end_bytes) {
  if (at_end_bytes.size() < 2) return std::nullopt;
  size_t from = at_end_bytes.size() >= 3 ? 2 : 1;
  std::vector<int64_t> deltas;
  for (size_t k = from; k < at_end_bytes.size(); ++k)
    deltas.push_back(int64_t(at_end_bytes[k] - at_end_bytes[k - 1]));  // two's complement: negative when it fell
  return median_rounded_toward_zero(deltas);
}

uint64_t median_from_second(const std::vector<uint64_t>& per_iteration_bytes) {
  if (per_iteration_bytes.size() < 2) return 0;
  std::vector<int64_t> values;
  for (size_t k = 1; k < per_iteration_bytes.size(); ++k)
    values.push_back(int64_t(std::min<uint64_t>(per_iteration_bytes[k], uint64_t(INT64_MAX))));
  return uint64_t(median_rounded_toward_zero(values));
}

std::string iterations_found_text(const EventPhases& phases) {
  std::string count = std::to_string(phases.iterations.size()) + " iterations";
  switch (phases.source) {
    case IterationSource::kNone: return "no iterations found";
    case IterationSource::kPythonLoop:
      // loop_line is the first line of the body that allocates, not the `for` line: say so.
      return count + ", from the loop in " + phases.loop_function + " whose body starts at " +
             basename_of(phases.loop_file) + ":" + std::to_string(phases.loop_line);
    case IterationSource::kNvtx: return count + ", from NVTX ranges \"" + phases.range_name + "\"";
  }
  return count;
}

}  // namespace memtrace
