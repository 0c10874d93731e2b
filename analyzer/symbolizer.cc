#include "symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "stack_table.h"

namespace memtrace {
namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

}  // namespace

std::string demangle(const char* name) {
  if (!name) return {};
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string result(out);
  std::free(out);
  return result;
}

struct Symbolizer::Impl {
  struct FunctionSymbol {
    uint64_t address;  // absolute, load bias applied
    uint64_t size;
    const char* name;  // owned by libdwfl's copy of the ELF
  };
  struct LoadedModule {
    proto::Module module;
    std::string name;
    Dwfl_Module* dwfl_module = nullptr;  // null when the file is missing or is not the one that ran
    bool build_id_mismatch = false;
    // Function symbols sorted by address, built on first use: libdwfl's own address lookup scans the
    // whole symbol table on every call, far too slow for libraries with 100,000s of symbols.
    bool symbols_loaded = false;
    std::vector<FunctionSymbol> functions;
  };

  Dwfl* dwfl = nullptr;
  std::vector<LoadedModule> modules;  // sorted by start
  std::unordered_map<uint64_t, NativeFrame> cache;

  explicit Impl(std::vector<proto::Module> trace_modules) {
    dwfl = dwfl_begin(&kOfflineCallbacks);
    if (dwfl) dwfl_report_begin(dwfl);
    for (auto& m : trace_modules) {
      LoadedModule loaded{std::move(m), {}, nullptr, false};
      loaded.name = basename_of(loaded.module.path());
      if (dwfl) report(loaded);
      modules.push_back(std::move(loaded));
    }
    if (dwfl) dwfl_report_end(dwfl, nullptr, nullptr);
    std::sort(modules.begin(), modules.end(), [](const LoadedModule& a, const LoadedModule& b) {
      return a.module.start() < b.module.start();
    });
  }

  ~Impl() {
    if (dwfl) dwfl_end(dwfl);
  }

  // Reports the module's file at its load bias (dlpi_addr, hence add_p_vaddr) and checks that it is
  // the build that ran.
  void report(LoadedModule& loaded) {
    const std::string& path = loaded.module.path();
    // The path comes from the trace: open only a regular file (a FIFO or a device there would block).
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    Dwfl_Module* mod = dwfl_report_elf(dwfl, loaded.name.c_str(), path.c_str(), -1,
                                       loaded.module.load_address(), true);
    if (!mod) return;
    const std::string& expected = loaded.module.build_id();
    if (!expected.empty()) {
      const unsigned char* bits = nullptr;
      GElf_Addr vaddr = 0;
      int length = dwfl_module_build_id(mod, &bits, &vaddr);
      if (length <= 0 || size_t(length) != expected.size() || std::memcmp(bits, expected.data(), length) != 0) {
        loaded.build_id_mismatch = true;
        return;
      }
    }
    loaded.dwfl_module = mod;
  }

  static void load_functions(LoadedModule& loaded) {
    loaded.symbols_loaded = true;
    int count = dwfl_module_getsymtab(loaded.dwfl_module);
    // Globals first among symbols at one address, as libdwfl prefers them too.
    std::vector<std::pair<FunctionSymbol, int>> ranked;
    for (int i = 1; i < count; ++i) {
      GElf_Sym sym;
      GElf_Addr address = 0;
      const char* name = dwfl_module_getsym_info(loaded.dwfl_module, i, &sym, &address, nullptr, nullptr, nullptr);
      int type = GELF_ST_TYPE(sym.st_info);
      if (!name || !*name || sym.st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC)) continue;
      int rank = GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? 0 : GELF_ST_BIND(sym.st_info) == STB_WEAK ? 1 : 2;
      ranked.push_back({FunctionSymbol{address, sym.st_size, name}, rank});
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      return a.first.address != b.first.address ? a.first.address < b.first.address : a.second < b.second;
    });
    for (const auto& [symbol, rank] : ranked)
      if (loaded.functions.empty() || loaded.functions.back().address != symbol.address) loaded.functions.push_back(symbol);
  }

  // The function containing `pc`, or nullptr.
  static const FunctionSymbol* function_containing(LoadedModule& loaded, uint64_t pc) {
    if (!loaded.symbols_loaded) load_functions(loaded);
    auto it = std::upper_bound(loaded.functions.begin(), loaded.functions.end(), pc,
                               [](uint64_t a, const FunctionSymbol& f) { return a < f.address; });
    if (it == loaded.functions.begin()) return nullptr;
    --it;
    // A symbol without a size covers up to the next one.
    if (it->size == 0 ? std::next(it) != loaded.functions.end() && pc >= std::next(it)->address
                      : pc >= it->address + it->size)
      return nullptr;
    return &*it;
  }

  LoadedModule* module_containing(uint64_t address) {
    return const_cast<LoadedModule*>(std::as_const(*this).module_containing(address));
  }

  const LoadedModule* module_containing(uint64_t address) const {
    auto it = std::upper_bound(modules.begin(), modules.end(), address,
                               [](uint64_t a, const LoadedModule& m) { return a < m.module.start(); });
    if (it == modules.begin()) return nullptr;
    --it;
    return address < it->module.end() ? &*it : nullptr;
  }

  NativeFrame lookup(uint64_t return_address) {
    NativeFrame frame;
    frame.address = return_address;
    LoadedModule* loaded = module_containing(return_address);
    if (!loaded) return frame;
    frame.module_path = loaded->module.path();
    frame.module_name = loaded->name;
    frame.module_offset = return_address - loaded->module.load_address();
    frame.in_python_interpreter = is_python_interpreter_module(loaded->name);
    frame.build_id_mismatch = loaded->build_id_mismatch;
    if (!loaded->dwfl_module) {
      frame.module_missing = !loaded->build_id_mismatch;
      return frame;
    }
    Dwarf_Addr pc = return_address - 1;  // inside the call instruction
    if (const FunctionSymbol* function = function_containing(*loaded, pc)) {
      // Versioned dynamic symbols come back as "name@@VERSION": the version is not part of the name.
      std::string plain(function->name);
      if (size_t at = plain.find('@'); at != std::string::npos && at > 0) plain.resize(at);
      frame.function = demangle(plain.c_str());
      frame.function_offset = return_address - function->address;
    }
    if (Dwfl_Line* line = dwfl_module_getsrc(loaded->dwfl_module, pc)) {
      int lineno = 0;
      const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (file) frame.source_file = file;
      if (lineno > 0) frame.line = uint32_t(lineno);
    }
    return frame;
  }
};

Symbolizer::Symbolizer(std::vector<proto::Module> modules) : impl_(std::make_unique<Impl>(std::move(modules))) {}
Symbolizer::~Symbolizer() = default;

const NativeFrame& Symbolizer::symbolize(uint64_t return_address) {
  auto it = impl_->cache.find(return_address);
  if (it == impl_->cache.end()) it = impl_->cache.emplace(return_address, impl_->lookup(return_address)).first;
  return it->second;
}

}  // namespace memtrace
