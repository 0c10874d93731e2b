// The fake driver's CUDA arrays. An array's backing memory is charged to its device, and its size follows
// a rule of the double's own: each level of width x height x depth elements (0 counts as 1) of NumChannels x
// the format's bytes, rounded up to 64 KiB (kArrayAlignmentBytes); a mipmapped array is the sum of its
// levels, each dimension halved (down to 1) from one level to the next. Like the real driver,
// cuArrayGetMemoryRequirements answers (that size) only for arrays made with CUDA_ARRAY3D_DEFERRED_MAPPING
// and refuses every other with CUDA_ERROR_INVALID_VALUE.
#include <type_traits>

#include "device_memory.h"
#include "driver_internal.h"

using namespace fakecuda;

struct CUarray_st {
  int device;
  uint64_t bytes;
  uintptr_t backing;
  bool deferred_mapping;
};
struct CUmipmappedArray_st {
  int device;
  uint64_t bytes;
  uintptr_t backing;
  bool deferred_mapping;
};

namespace {

constexpr uint64_t kArrayAlignmentBytes = 64u << 10;

// Bytes of one element of `format`, 0 for formats the double does not know.
uint64_t format_bytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

uint64_t at_least_one(size_t n) { return n == 0 ? 1 : n; }

uint64_t level_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned level) {
  uint64_t elements = at_least_one(d.Width >> level) * at_least_one(d.Height >> level) * at_least_one(d.Depth >> level);
  uint64_t bytes = elements * d.NumChannels * format_bytes(d.Format);
  return (bytes + kArrayAlignmentBytes - 1) / kArrayAlignmentBytes * kArrayAlignmentBytes;
}

bool valid(const CUDA_ARRAY3D_DESCRIPTOR* d) {
  return d && d->Width > 0 && format_bytes(d->Format) > 0 &&
         (d->NumChannels == 1 || d->NumChannels == 2 || d->NumChannels == 4);
}

// Charges `bytes` to the current device: the array's backing memory, freed with its context.
template <typename Handle>
CUresult create(Handle* handle, uint64_t bytes, unsigned flags) {
  int device = 0;
  CUresult result = current_device(&device);
  if (result != CUDA_SUCCESS) return result;
  uintptr_t backing = memory_allocate(device, bytes, MemoryKind::kArray, current_context());
  if (!backing) return CUDA_ERROR_OUT_OF_MEMORY;
  using Body = std::remove_pointer_t<Handle>;
  *handle = new Body{device, bytes, backing, (flags & CUDA_ARRAY3D_DEFERRED_MAPPING) != 0};
  return CUDA_SUCCESS;
}

template <typename Handle>
CUresult destroy(Handle handle) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  memory_free(handle->backing);  // already gone when its context was destroyed
  delete handle;
  return driver_torn_down() ? CUDA_ERROR_DEINITIALIZED : CUDA_SUCCESS;
}

template <typename Handle>
CUresult requirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* out, Handle handle, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!out || !handle) return CUDA_ERROR_INVALID_VALUE;
  if (device != handle->device) return CUDA_ERROR_INVALID_DEVICE;
  if (!handle->deferred_mapping) return CUDA_ERROR_INVALID_VALUE;
  *out = CUDA_ARRAY_MEMORY_REQUIREMENTS{};
  out->size = handle->bytes;
  out->alignment = kArrayAlignmentBytes;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (!handle || !desc) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = desc->Width;
  d.Height = desc->Height;
  d.Format = desc->Format;
  d.NumChannels = desc->NumChannels;
  if (!valid(&d)) return CUDA_ERROR_INVALID_VALUE;
  return create(handle, level_bytes(d, 0), 0);
}

CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (!handle || !valid(desc)) return CUDA_ERROR_INVALID_VALUE;
  return create(handle, level_bytes(*desc, 0), desc->Flags);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels) {
  if (!handle || !valid(desc) || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t bytes = 0;
  for (unsigned level = 0; level < levels; level++) bytes += level_bytes(*desc, level);
  return create(handle, bytes, desc->Flags);
}

CUresult cuArrayDestroy(CUarray handle) { return destroy(handle); }
CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle) { return destroy(handle); }

CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* out, CUarray handle, CUdevice device) {
  return requirements(out, handle, device);
}

CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* out, CUmipmappedArray handle,
                                               CUdevice device) {
  return requirements(out, handle, device);
}

}  // extern "C"
