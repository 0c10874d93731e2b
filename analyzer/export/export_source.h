// What every `memtrace export` format starts from: the trace's path (a format that needs every event reads it
// again, streaming, through read/ or model/replay.h), its first-pass analysis, the resolver that turns its stacks
// into frames, and the job's iterations and phases, found on first use (they cost one more pass over the trace).
// The formats themselves are one file each in this folder, each with a write_*() that cmd_export.cc calls.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "analysis/analysis.h"
#include "analysis/phases.h"
#include "stacks/frames.h"

namespace memtrace {

class ExportSource {
 public:
  // `find_phases` is called at most once, by the first phases() call.
  ExportSource(const Analysis& analysis, FrameResolver& resolver, std::function<EventPhases()> find_phases)
      : analysis_(analysis), resolver_(resolver), find_phases_(std::move(find_phases)) {}

  const std::string& path() const { return analysis_.path; }
  // The file the export is written to ("" when not known): a format may choose its encoding by its name.
  const std::string& output_path() const { return output_path_; }
  void set_output_path(std::string path) { output_path_ = std::move(path); }
  const Analysis& analysis() const { return analysis_; }
  FrameResolver& resolver() const { return resolver_; }
  // The iterations and the phase of each event (analysis/phases.h). Throws TraceError where the trace no
  // longer reads.
  const EventPhases& phases() const {
    if (!phases_) phases_ = find_phases_();
    return *phases_;
  }

 private:
  const Analysis& analysis_;
  FrameResolver& resolver_;
  std::function<EventPhases()> find_phases_;
  mutable std::optional<EventPhases> phases_;
  std::string output_path_;
};

}  // namespace memtrace
