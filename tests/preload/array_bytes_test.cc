// The element bytes the tracer records for a CUDA array the driver will not size (preload/hooks/array_bytes.h).
#include "hooks/array_bytes.h"

#include <gtest/gtest.h>

namespace memtrace {
namespace {

TEST(ArrayBytes, DriverFormatsCountTheirChannels) {
  EXPECT_EQ(driver_format_element_bytes(0x20, 4), 16u);  // FLOAT x 4 channels: 4 x 4
  EXPECT_EQ(driver_format_element_bytes(0x02, 2), 4u);   // UNSIGNED_INT16 x 2: 2 x 2
  EXPECT_EQ(driver_format_element_bytes(0x08, 1), 1u);   // SIGNED_INT8 x 1
  EXPECT_EQ(driver_format_element_bytes(0xc5, 4), 8u);   // UNORM_INT16X4: 4 channels of 2 bytes, whatever `channels`
  EXPECT_EQ(driver_format_element_bytes(0x91, 1), 0u);   // BC1_UNORM: 8 bytes per 4 x 4 block, not per element
}

TEST(ArrayBytes, RuntimeFormatsAreTheirBits) {
  EXPECT_EQ(runtime_format_element_bytes(32, 32, 32, 32), 16u);  // float4: 128 bits
  EXPECT_EQ(runtime_format_element_bytes(8, 0, 0, 0), 1u);
  EXPECT_EQ(runtime_format_element_bytes(0, 0, 0, 0), 0u);  // NV12 and other special kinds say nothing
}

TEST(ArrayBytes, AbsentDimensionsCountOne) {
  EXPECT_EQ(array_element_bytes(1000, 0, 0, 4, 1), 4000u);     // 1000 floats
  EXPECT_EQ(array_element_bytes(100, 10, 0, 16, 1), 16000u);   // 100 x 10 float4
  EXPECT_EQ(array_element_bytes(300, 200, 5, 1, 1), 300000u);  // 300 x 200 x 5 uchar
  EXPECT_EQ(array_element_bytes(300, 200, 5, 1, 0), 300000u);  // 0 levels: a plain array
}

TEST(ArrayBytes, MipmapLevelsHalveDownToOne) {
  // 256 x 256 floats, 3 levels: 256*256*4 + 128*128*4 + 64*64*4 = 262144 + 65536 + 16384.
  EXPECT_EQ(array_element_bytes(256, 256, 0, 4, 3), 344064u);
  // 4 x 2 bytes, 4 levels: 4*2 + 2*1 + 1*1 + 1*1 (both dimensions stop at 1) = 8 + 2 + 1 + 1.
  EXPECT_EQ(array_element_bytes(4, 2, 0, 1, 4), 12u);
}

}  // namespace
}  // namespace memtrace
