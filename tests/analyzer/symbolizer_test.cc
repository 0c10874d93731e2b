// Offline symbolization against this test binary itself, described the way the tracer describes a
// module (path, load bias, executable range, build id).
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "cli/report_session.h"
#include "report/json/report_json.h"
#include "stacks/symbolizer.h"
#include "trace_builder.h"

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

// ---- Which files the symbolizer opens ----

namespace fs = std::filesystem;

// A module at the test binary's addresses whose recorded file is `path`, without a build id (so that any ELF file
// there would be used).
proto::Module module_at(const std::string& path) {
  proto::Module module = main_module();
  module.set_path(path);
  module.clear_build_id();
  return module;
}

// A fresh directory under the tests' temporary one.
fs::path fresh_dir(const std::string& name) {
  fs::path dir = test::temp_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Symbolizer, OpensOnlyRegularElfFilesOutsideKernelFilesystems) {
  const fs::path dir = fresh_dir("symbolizer-not-elf");
  const std::string fifo = (dir / "libfifo.so").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);  // opened without O_NONBLOCK, this would wait for a writer forever
  const std::string text_file = (dir / "libtext.so").string();
  test::write_file(text_file, "not an ELF file\n");
  const std::string magic_only = (dir / "libmagic.so").string();
  test::write_file(magic_only, std::string("\x7f"
                                           "ELF",
                                           4) +
                                   std::string(60, '\0'));  // the magic, no ELF
  // The first 14 bytes of a bzip2 file: libdw decompresses what is not ELF, and spun forever on this.
  const std::string bzip2_start = (dir / "libbzip2.so").string();
  test::write_file(bzip2_start, std::string("BZh91AY&SY\x06\xc1\xf4\x82", 14));
  const std::string to_proc = (dir / "libproc.so").string();
  fs::create_symlink("/proc/self/status", to_proc);
  const std::vector<std::string> paths = {fifo,        text_file,          magic_only,          bzip2_start,
                                          to_proc,     dir.string(),       "/proc/self/status", "/proc/self/exe",
                                          "/dev/zero", "/sys/kernel/notes"};
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    Symbolizer symbolizer({module_at(path)});
    const NativeFrame& f = symbolizer.symbolize(known_function_return_address());
    EXPECT_TRUE(f.module_missing);
    EXPECT_FALSE(f.build_id_mismatch);
    EXPECT_EQ(f.function, "");
    EXPECT_EQ(f.module_path, path);
  }
  // The same binary through an ordinary path is read (so the cases above are missing for what they are).
  const std::string copy = (dir / "analyzer_tests_copy").string();
  fs::copy_file("/proc/self/exe", copy);
  Symbolizer symbolizer({module_at(copy)});
  EXPECT_EQ(symbolizer.symbolize(known_function_return_address()).function,
            "memtrace_test_symbols::known_function_for_symbolizer(int)");
}

TEST(Symbolizer, DebugPathsFindTheBinaryByFileName) {
  const fs::path dir = fresh_dir("symbolizer-by-name");
  fs::copy_file("/proc/self/exe", dir / "libcopied.so");
  proto::Module module = main_module();  // with the test binary's build id
  module.set_path("/machine/that/recorded/libcopied.so");
  Symbolizer without({module});
  EXPECT_TRUE(without.symbolize(known_function_return_address()).module_missing);
  Symbolizer with({module}, {"/nonexistent-first", dir.string()});
  const NativeFrame& f = with.symbolize(known_function_return_address());
  EXPECT_EQ(f.function, "memtrace_test_symbols::known_function_for_symbolizer(int)");
  EXPECT_EQ(f.line, memtrace_test_symbols::kKnownFunctionLine);
  EXPECT_FALSE(f.module_missing);
  EXPECT_FALSE(f.build_id_mismatch);
  EXPECT_EQ(f.module_path, "/machine/that/recorded/libcopied.so");  // the recorded path is what reports name
}

TEST(Symbolizer, DebugPathsFindTheBinaryByBuildId) {
  const fs::path dir = fresh_dir("symbolizer-by-build-id");
  proto::Module module = main_module();
  module.set_path("/machine/that/recorded/libother-name.so");
  std::string id;
  for (unsigned char b : module.build_id()) {
    static const char kDigits[] = "0123456789abcdef";
    id += kDigits[b >> 4];
    id += kDigits[b & 0xF];
  }
  fs::create_directories(dir / ".build-id" / id.substr(0, 2));
  fs::copy_file("/proc/self/exe", dir / ".build-id" / id.substr(0, 2) / (id.substr(2) + ".debug"));
  Symbolizer symbolizer({module}, {dir.string() + "/"});  // a trailing slash as a user may type it
  const NativeFrame& f = symbolizer.symbolize(known_function_return_address());
  EXPECT_EQ(f.function, "memtrace_test_symbols::known_function_for_symbolizer(int)");
  EXPECT_FALSE(f.build_id_mismatch);
}

TEST(Symbolizer, AFileOfAnotherBuildIsPassedOverForOneThatMatches) {
  // A debug directory holding another build under the module's name: the recorded path, the build that ran, is
  // used; without it, the module is a build id mismatch.
  const fs::path dir = fresh_dir("symbolizer-other-build");
  const std::string copy = (dir / "analyzer_tests_copy").string();
  fs::copy_file("/proc/self/exe", copy);
  const fs::path debug = fresh_dir("symbolizer-other-build-debug");
  fs::copy_file("/bin/true", debug / "analyzer_tests_copy");
  proto::Module module = main_module();
  module.set_path(copy);
  Symbolizer found({module}, {debug.string()});
  EXPECT_EQ(found.symbolize(known_function_return_address()).function,
            "memtrace_test_symbols::known_function_for_symbolizer(int)");
  module.set_path("/machine/that/recorded/analyzer_tests_copy");
  Symbolizer mismatched({module}, {debug.string()});
  const NativeFrame& f = mismatched.symbolize(known_function_return_address());
  EXPECT_TRUE(f.build_id_mismatch);
  EXPECT_FALSE(f.module_missing);
  EXPECT_EQ(f.function, "");
}

// ---- When it opens them, and how many ----

// `module` moved up by `shift` bytes: the same file loaded at another address.
proto::Module shifted(proto::Module module, uint64_t shift) {
  module.set_load_address(module.load_address() + shift);
  module.set_start(module.start() + shift);
  module.set_end(module.end() + shift);
  return module;
}

TEST(Symbolizer, ModulesWithoutFramesOpenNoFile) {
  std::vector<proto::Module> modules;
  for (uint64_t k = 1; k <= 1000; ++k) modules.push_back(shifted(main_module(), k << 32));
  Symbolizer symbolizer(modules);
  EXPECT_EQ(symbolizer.files_opened(), 0u);
  // A frame outside every module opens nothing either; one inside the 500th opens its file.
  EXPECT_EQ(symbolizer.symbolize(0x1000).module_name, "");
  EXPECT_EQ(symbolizer.files_opened(), 0u);
  const NativeFrame& f = symbolizer.symbolize(known_function_return_address() + (500ull << 32));
  EXPECT_EQ(f.function, "memtrace_test_symbols::known_function_for_symbolizer(int)");
  EXPECT_EQ(symbolizer.files_opened(), 1u);
}

TEST(Symbolizer, ManyModulesOfOneFileShareItsOpening) {
  const proto::Module real = main_module();
  const fs::path dir = fresh_dir("symbolizer-one-file");
  const fs::path link = dir / "analyzer_tests_link";  // another path, the same file
  fs::create_symlink(real.path(), link);
  std::vector<proto::Module> modules;
  for (uint64_t k = 1; k <= 20000; ++k) {
    proto::Module m = shifted(real, k << 32);
    if (k % 2 == 0) m.set_path(link.string());
    modules.push_back(std::move(m));
  }
  Symbolizer many(modules);
  Symbolizer one({real});
  const NativeFrame& expected = one.symbolize(known_function_return_address());
  ASSERT_EQ(expected.function, "memtrace_test_symbols::known_function_for_symbolizer(int)");
  for (uint64_t k : {1ull, 12345ull, 20000ull}) {  // through the recorded path, then twice through the link
    SCOPED_TRACE(k);
    const NativeFrame& f = many.symbolize(known_function_return_address() + (k << 32));
    EXPECT_EQ(f.module_name, k % 2 ? "analyzer_tests" : "analyzer_tests_link");
    EXPECT_EQ(f.module_offset, expected.module_offset);
    EXPECT_EQ(f.function, expected.function);
    EXPECT_EQ(f.function_offset, 1u);
    EXPECT_EQ(f.source_file, expected.source_file);
    EXPECT_EQ(f.line, memtrace_test_symbols::kKnownFunctionLine);
    EXPECT_FALSE(f.module_missing);
    EXPECT_FALSE(f.build_id_mismatch);
  }
  EXPECT_EQ(many.files_opened(), 1u);
  EXPECT_EQ(many.modules_not_opened(), 0u);
}

TEST(Symbolizer, FilesPastTheLimitAreNotOpenedAndCounted) {
  const proto::Module real = main_module();
  const fs::path dir = fresh_dir("symbolizer-limit");
  const fs::path copy = dir / "analyzer_tests_copy";  // another file, the same build
  fs::copy_file(real.path(), copy);
  proto::Module first = shifted(real, 1ull << 32);
  proto::Module same_file = shifted(real, 2ull << 32);
  proto::Module other_file = shifted(real, 3ull << 32);
  proto::Module other_file_again = shifted(real, 4ull << 32);
  other_file.set_path(copy.string());
  other_file_again.set_path(copy.string());
  Symbolizer symbolizer({first, same_file, other_file, other_file_again}, {}, /*max_files_opened=*/1);
  const std::string name = "memtrace_test_symbols::known_function_for_symbolizer(int)";
  EXPECT_EQ(symbolizer.symbolize(known_function_return_address() + (1ull << 32)).function, name);
  EXPECT_EQ(symbolizer.symbolize(known_function_return_address() + (2ull << 32)).function, name);
  for (uint64_t k : {3ull, 4ull}) {
    const NativeFrame& f = symbolizer.symbolize(known_function_return_address() + (k << 32));
    EXPECT_EQ(f.module_name, "analyzer_tests_copy");
    EXPECT_EQ(f.function, "");
    EXPECT_TRUE(f.module_missing);
    EXPECT_FALSE(f.build_id_mismatch);
  }
  symbolizer.symbolize(known_function_return_address() + (3ull << 32) + 4);  // the same module again: counted once
  EXPECT_EQ(symbolizer.files_opened(), 1u);
  EXPECT_EQ(symbolizer.modules_not_opened(), 2u);
}

TEST(Symbolizer, ReportsSayHowManyModulesWereNotOpened) {
  const std::string path = test::temp_path("modules-not-opened.mtrace");
  test::TraceBuilder b;
  b.start().end(0, 10).end_chunk();
  test::write_file(path, b.bytes());
  auto analysis = analyze_trace(path, false);
  std::ostringstream with, without;
  print_health(with, *analysis, 3);
  print_health(without, *analysis);
  EXPECT_NE(with.str().find("\n  modules not symbolized (the trace names more than 4,096 files) 3\n"),
            std::string::npos)
      << with.str();
  EXPECT_EQ(without.str().find("modules not symbolized"), std::string::npos);

  const fs::path dir = fresh_dir("symbolizer-limit-json");
  fs::copy_file(main_module().path(), dir / "other");
  proto::Module other = shifted(main_module(), 1ull << 32);
  other.set_path((dir / "other").string());
  Symbolizer symbolizer({main_module(), other}, {}, /*max_files_opened=*/1);
  nlohmann::json trace = nlohmann::json::object();
  add_symbolizer_health(trace, symbolizer);
  EXPECT_FALSE(trace.contains("modules_not_opened"));
  symbolizer.symbolize(known_function_return_address());
  symbolizer.symbolize(known_function_return_address() + (1ull << 32));
  add_symbolizer_health(trace, symbolizer);
  EXPECT_EQ(trace["modules_not_opened"], 1);
}

TEST(DebugPaths, ParsesDirectoriesAndRefusesOthers) {
  const fs::path a = fresh_dir("debug-paths-a"), b = fresh_dir("debug-paths-b");
  EXPECT_EQ(parse_debug_paths(a.string() + "::" + b.string() + "/:"),
            (std::vector<std::string>{a.string(), b.string()}));
  EXPECT_EQ(parse_debug_paths("/"), (std::vector<std::string>{"/"}));
  try {
    parse_debug_paths(a.string() + ":/nonexistent-dir");
    ADD_FAILURE() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--debug-paths: '/nonexistent-dir' is not a directory");
  }
  EXPECT_THROW(parse_debug_paths(":"), UsageError);
  EXPECT_THROW(parse_debug_paths("/proc/self/status"), UsageError);
}

}  // namespace
}  // namespace memtrace
