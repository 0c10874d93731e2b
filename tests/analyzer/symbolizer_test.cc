// Offline symbolization against this test binary itself, described the way the tracer describes a
// module (path, load bias, executable range, build id).
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstring>
#include <filesystem>

#include "symbolizer.h"

namespace memtrace_test_symbols {
// The line below is the function's first line; its entry address maps to it.
constexpr uint32_t kKnownFunctionLine = __LINE__ + 1;
__attribute__((noinline)) int known_function_for_symbolizer(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}
}  // namespace memtrace_test_symbols

namespace memtrace {
namespace {

// The main executable's module as the tracer records it (dl_iterate_phdr's first entry).
proto::Module main_module() {
  proto::Module module;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* m = static_cast<proto::Module*>(data);
        m->set_path(std::filesystem::read_symlink("/proc/self/exe").string());
        m->set_load_address(info->dlpi_addr);
        uint64_t start = UINT64_MAX, end = 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            start = std::min<uint64_t>(start, info->dlpi_addr + ph.p_vaddr);
            end = std::max<uint64_t>(end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
          }
          if (ph.p_type == PT_NOTE) {
            const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* limit = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= limit) {
              auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
              const char* name = p + sizeof(ElfW(Nhdr));
              const char* desc = name + ((note->n_namesz + 3) & ~3u);
              if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0)
                m->set_build_id(std::string(desc, note->n_descsz));
              p = desc + ((note->n_descsz + 3) & ~3u);
            }
          }
        }
        m->set_start(start);
        m->set_end(end);
        return 1;  // the first entry is the executable
      },
      &module);
  return module;
}

uint64_t known_function_return_address() {
  // A return address just after a call at the function's first byte: address - 1 lies in the function.
  return reinterpret_cast<uint64_t>(&memtrace_test_symbols::known_function_for_symbolizer) + 1;
}

TEST(Symbolizer, NamesAFunctionOfThisBinary) {
  proto::Module module = main_module();
  ASSERT_FALSE(module.build_id().empty()) << "the test binary should carry a GNU build id";
  Symbolizer symbolizer({module});
  const NativeFrame& f = symbolizer.symbolize(known_function_return_address());
  EXPECT_EQ(f.function, "memtrace_test_symbols::known_function_for_symbolizer(int)");
  EXPECT_EQ(f.function_offset, 1u);
  EXPECT_EQ(f.module_name, std::filesystem::path(module.path()).filename().string());
  EXPECT_EQ(f.module_offset, known_function_return_address() - module.load_address());
  EXPECT_FALSE(f.build_id_mismatch);
  EXPECT_EQ(std::filesystem::path(f.source_file).filename(), "symbolizer_test.cc");
  EXPECT_EQ(f.line, memtrace_test_symbols::kKnownFunctionLine);
  // Cached: the same object comes back.
  EXPECT_EQ(&symbolizer.symbolize(known_function_return_address()), &f);
}

TEST(Symbolizer, BuildIdMismatchGivesNoName) {
  proto::Module module = main_module();
  module.set_build_id(std::string("\x01\x02\x03\x04", 4));
  Symbolizer symbolizer({module});
  const NativeFrame& f = symbolizer.symbolize(known_function_return_address());
  EXPECT_TRUE(f.build_id_mismatch);
  EXPECT_EQ(f.function, "");
  EXPECT_EQ(f.module_offset, known_function_return_address() - module.load_address());
}

TEST(Symbolizer, MissingFileGivesModuleAndOffset) {
  proto::Module module;
  module.set_path("/nonexistent/libgone.so");
  module.set_load_address(0x10000);
  module.set_start(0x11000);
  module.set_end(0x20000);
  Symbolizer symbolizer({module});
  const NativeFrame& f = symbolizer.symbolize(0x11123);
  EXPECT_TRUE(f.module_missing);
  EXPECT_EQ(f.module_name, "libgone.so");
  EXPECT_EQ(f.module_offset, 0x1123u);  // 0x11123 - 0x10000
  EXPECT_EQ(f.function, "");
  // Outside every module: nothing known but the address.
  const NativeFrame& outside = symbolizer.symbolize(0x30000);
  EXPECT_EQ(outside.module_name, "");
}

TEST(Symbolizer, Demangles) {
  EXPECT_EQ(demangle("_Z3fooi"), "foo(int)");
  EXPECT_EQ(demangle("cudaMalloc"), "cudaMalloc");
}

}  // namespace
}  // namespace memtrace
