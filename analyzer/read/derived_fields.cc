#include "read/derived_fields.h"

namespace memtrace {

bool DerivedFields::switch_device(const EventFields& e, std::string* error) {
  if (current_.device != kNoDevice) devices_[current_.device] = current_;
  if (auto d = devices_.find(e.device()); d != devices_.end()) {
    current_ = d->second;
    return true;
  }
  if (!(e.has_allocator_allocated_bytes() && e.has_allocator_reserved_bytes())) {
    *error = "TORCH_ALLOCATOR event of device " + std::to_string(e.device()) +
             " leaves an allocator total to be derived, but no earlier TORCH_ALLOCATOR event of that device "
             "gives one";
    return false;
  }
  current_ = DeviceTotals{e.device(), e.allocator_allocated_bytes(), e.allocator_reserved_bytes()};
  devices_.emplace(current_.device, current_);
  return true;
}

}  // namespace memtrace
