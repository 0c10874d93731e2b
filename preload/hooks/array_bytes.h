// The bytes of a CUDA array's elements, from the description it was created with. The driver says how much
// it set aside only for arrays made with CUDA_ARRAY3D_DEFERRED_MAPPING (cuArrayGetMemoryRequirements
// answers CUDA_ERROR_INVALID_VALUE for every other array: cuda.h, and measured on the H200 by
// tests/gpu/memory_model.cu); for those the tracer records this instead.
#pragma once
#include <cstdint>

namespace memtrace {

// Bytes of one element of a driver array format (CUarray_format, cuda.h) with `channels` channels. 0 for
// the block-compressed and video formats, whose elements are not a whole number of bytes each.
constexpr uint64_t driver_format_element_bytes(unsigned format, unsigned channels) {
  switch (format) {
    case 0x01:
    case 0x08: return 1ull * channels;  // UNSIGNED_INT8, SIGNED_INT8
    case 0x02:
    case 0x09:
    case 0x10: return 2ull * channels;  // UNSIGNED_INT16, SIGNED_INT16, HALF
    case 0x03:
    case 0x0a:
    case 0x20: return 4ull * channels;  // UNSIGNED_INT32, SIGNED_INT32, FLOAT
    case 0xc0:
    case 0xc6: return 1;  // UNORM_INT8X1, SNORM_INT8X1: the channels are in the name
    case 0xc1:
    case 0xc7:
    case 0xc3:
    case 0xc9: return 2;  // INT8X2, INT16X1
    case 0xc2:
    case 0xc8:
    case 0xc4:
    case 0xca:
    case 0x50: return 4;  // INT8X4, INT16X2, UNORM_INT_101010_2
    case 0xc5:
    case 0xcb: return 8;  // INT16X4
    default: return 0;
  }
}

// Bytes of one element of a runtime channel description (cudaChannelFormatDesc): its channels' bits.
constexpr uint64_t runtime_format_element_bytes(int x_bits, int y_bits, int z_bits, int w_bits) {
  int bits = x_bits + y_bits + z_bits + w_bits;
  return bits > 0 && bits % 8 == 0 ? static_cast<uint64_t>(bits / 8) : 0;
}

// Bytes of the elements of an array of width x height x depth elements (a height or depth of 0: that
// dimension is absent) over `levels` mipmap levels (1 for a plain array), each level halving every
// dimension, down to 1.
constexpr uint64_t array_element_bytes(uint64_t width, uint64_t height, uint64_t depth, uint64_t element_bytes,
                                       unsigned levels) {
  auto extent = [](uint64_t n, unsigned level) {
    uint64_t halved = n >> level;
    return n == 0 ? uint64_t{1} : (halved == 0 ? uint64_t{1} : halved);
  };
  uint64_t total = 0;
  for (unsigned level = 0; level < (levels == 0 ? 1u : levels); level++)
    total += extent(width, level) * extent(height, level) * extent(depth, level) * element_bytes;
  return total;
}

}  // namespace memtrace
