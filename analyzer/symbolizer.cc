#include "symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <regex>

namespace memtrace {
namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The interpreter's own frames (eval loop, call machinery) are noise next to the Python frames the
// tracer spliced in for them.
bool is_python_interpreter(const std::string& name) {
  static const std::regex pattern(R"(^(libpython[0-9.]*.*\.so.*|python[0-9.]*)$)");
  return std::regex_match(name, pattern);
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
  struct LoadedModule {
    proto::Module module;
    std::string name;
    Dwfl_Module* dwfl_module = nullptr;  // null when the file is missing or is not the one that ran
    bool build_id_mismatch = false;
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

  const LoadedModule* module_containing(uint64_t address) const {
    auto it = std::upper_bound(modules.begin(), modules.end(), address,
                               [](uint64_t a, const LoadedModule& m) { return a < m.module.start(); });
    if (it == modules.begin()) return nullptr;
    --it;
    return address < it->module.end() ? &*it : nullptr;
  }

  NativeFrame lookup(uint64_t return_address) const {
    NativeFrame frame;
    frame.address = return_address;
    const LoadedModule* loaded = module_containing(return_address);
    if (!loaded) return frame;
    frame.module_path = loaded->module.path();
    frame.module_name = loaded->name;
    frame.module_offset = return_address - loaded->module.load_address();
    frame.in_python_interpreter = is_python_interpreter(loaded->name);
    frame.build_id_mismatch = loaded->build_id_mismatch;
    if (!loaded->dwfl_module) {
      frame.module_missing = !loaded->build_id_mismatch;
      return frame;
    }
    Dwarf_Addr pc = return_address - 1;  // inside the call instruction
    GElf_Off offset = 0;
    GElf_Sym sym;
    const char* name = dwfl_module_addrinfo(loaded->dwfl_module, pc, &offset, &sym, nullptr, nullptr, nullptr);
    if (name) {
      // Versioned dynamic symbols come back as "name@@VERSION": the version is not part of the name.
      std::string plain(name);
      if (size_t at = plain.find('@'); at != std::string::npos && at > 0) plain.resize(at);
      frame.function = demangle(plain.c_str());
      frame.function_offset = offset + 1;
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
