#include "derived_fields.h"

namespace memtrace {

bool DerivedFields::switch_device(const EventFields& e, std::string* error) {
  for (DeviceTotals& d : devices_) {
    if (d.device == current_.device) d = current_;
  }
  for (const DeviceTotals& d : devices_) {
    if (d.device == e.device()) {
      current_ = d;
      return true;
    }
  }
  if (!(e.has_allocator_allocated_bytes() && e.has_allocator_reserved_bytes())) {
    *error = "TORCH_ALLOCATOR event of device " + std::to_string(e.device()) +
             " leaves an allocator total to be derived, but no earlier TORCH_ALLOCATOR event of that device "
             "gives one";
    return false;
  }
  current_ = DeviceTotals{e.device(), e.allocator_allocated_bytes(), e.allocator_reserved_bytes()};
  devices_.push_back(current_);
  return true;
}

}  // namespace memtrace
