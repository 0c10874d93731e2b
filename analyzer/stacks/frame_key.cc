#include "stacks/frame_key.h"

#include <algorithm>
#include <functional>

namespace memtrace {

std::strong_ordering operator<=>(const PortableFrame& a, const PortableFrame& b) {
  if (a.kind != b.kind) return a.kind <=> b.kind;
  switch (a.kind) {
    case PortableFrame::Kind::kNative:
      if (auto order = *a.module <=> *b.module; order != 0) return order;
      return a.value <=> b.value;
    case PortableFrame::Kind::kPython: return *a.source <=> *b.source;
    case PortableFrame::Kind::kNativeOutsideModules:
    case PortableFrame::Kind::kPythonNotInTrace: break;
  }
  return a.value <=> b.value;
}

bool operator==(const PortableFrame& a, const PortableFrame& b) { return (a <=> b) == 0; }

bool SameTableLess::operator()(const PortableSiteKey& a, const PortableSiteKey& b) const {
  // std::less: a total order over pointers to unrelated objects, which < does not promise.
  auto before = [](auto* x, auto* y) {
    return std::less<decltype(x)>{}(x, y) ? std::strong_ordering::less : std::strong_ordering::greater;
  };
  auto order = [&](const PortableFrame& x, const PortableFrame& y) -> std::strong_ordering {
    if (x.kind != y.kind) return x.kind <=> y.kind;
    if (x.module != y.module) return before(x.module, y.module);
    if (x.source != y.source) return before(x.source, y.source);
    return x.value <=> y.value;
  };
  const size_t common = std::min(a.frames.size(), b.frames.size());
  for (size_t i = 0; i < common; ++i)
    if (auto o = order(a.frames[i], b.frames[i]); o != 0) return o < 0;
  if (a.frames.size() != b.frames.size()) return a.frames.size() < b.frames.size();
  if (a.cuts != b.cuts) return a.cuts < b.cuts;
  return a.python_frames_from_backward < b.python_frames_from_backward;
}

}  // namespace memtrace
