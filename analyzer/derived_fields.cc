#include "derived_fields.h"

namespace memtrace {

bool DerivedFields::fill_totals(proto::Event& e, std::string* error) {
  DeviceTotals* last = nullptr;
  for (DeviceTotals& d : devices_) {
    if (d.device == e.device()) {
      last = &d;
      break;
    }
  }
  if (!last && !(e.has_allocator_allocated_bytes() && e.has_allocator_reserved_bytes())) {
    *error = "TORCH_ALLOCATOR event of device " + std::to_string(e.device()) +
             " leaves an allocator total to be derived, but no earlier TORCH_ALLOCATOR event of that device "
             "gives one";
    return false;
  }
  if (!e.has_allocator_allocated_bytes()) {
    // Unsigned arithmetic, as the writer's (preload/event_encoder.h).
    uint64_t change = e.kind() == proto::ALLOC ? e.size() : e.kind() == proto::FREE ? uint64_t{0} - e.size() : 0;
    e.set_allocator_allocated_bytes(last->allocated_bytes + change);
  }
  if (!e.has_allocator_reserved_bytes()) e.set_allocator_reserved_bytes(last->reserved_bytes);
  if (!last) {
    devices_.push_back(DeviceTotals{e.device(), 0, 0});
    last = &devices_.back();
  }
  last->allocated_bytes = e.allocator_allocated_bytes();
  last->reserved_bytes = e.allocator_reserved_bytes();
  return true;
}

}  // namespace memtrace
