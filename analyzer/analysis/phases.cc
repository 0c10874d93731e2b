#include "analysis/phases.h"

namespace memtrace {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kOutside: return "outside iterations";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kOther: return "other";
  }
  return "other";
}

}  // namespace memtrace
