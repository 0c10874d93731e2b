#include "derived_fields.h"

namespace memtrace {

bool DerivedFields::fill_first_totals(const EventFields& e, std::string* error) {
  if (!(e.has_allocator_allocated_bytes() && e.has_allocator_reserved_bytes())) {
    *error = "TORCH_ALLOCATOR event of device " + std::to_string(e.device()) +
             " leaves an allocator total to be derived, but no earlier TORCH_ALLOCATOR event of that device "
             "gives one";
    return false;
  }
  devices_.push_back(DeviceTotals{e.device(), e.allocator_allocated_bytes(), e.allocator_reserved_bytes()});
  return true;
}

}  // namespace memtrace
