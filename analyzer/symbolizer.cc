#include "symbolizer.h"

#include <cxxabi.h>
#include <elf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <libelf.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
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

// Kernel interfaces: opening or reading a file there can block, never end, or act on the system.
bool under_kernel_filesystem(const std::string& path) {
  for (const char* root : {"/proc", "/sys", "/dev"}) {
    const size_t n = std::strlen(root);
    if (path.compare(0, n, root) == 0 && (path.size() == n || path[n] == '/')) return true;
  }
  return false;
}

// An ELF file a trace or the user names, opened: its descriptor, and its real path in `*real_path`; -1 when it
// is not a regular file of at most kMaxElfFileBytes starting with the ELF magic, or lies in /proc, /sys or /dev
// (checked on the path as given, on it with symlinks and ".." resolved, and on the opened file's filesystem, since
// a symlink can change between the two). O_NONBLOCK: opening a FIFO that was put there meanwhile does not wait for a
// writer. What is checked is the descriptor libdwfl reads, so nothing can swap the file after the checks.
int open_elf(const std::string& path, std::string* real_path) {
  if (path.empty() || path.size() >= PATH_MAX) return -1;
  char resolved[PATH_MAX];
  if (under_kernel_filesystem(path) || !realpath(path.c_str(), resolved) || under_kernel_filesystem(resolved))
    return -1;
  const int fd = open(resolved, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  struct stat st;
  struct statfs fs;
  unsigned char magic[SELFMAG];
  const bool elf = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= SELFMAG &&
                   uint64_t(st.st_size) <= kMaxElfFileBytes && fstatfs(fd, &fs) == 0 &&
                   fs.f_type != PROC_SUPER_MAGIC && fs.f_type != SYSFS_MAGIC &&
                   pread(fd, magic, SELFMAG, 0) == SELFMAG && std::memcmp(magic, ELFMAG, SELFMAG) == 0;
  if (!elf) {
    close(fd);
    return -1;
  }
  *real_path = resolved;
  return fd;
}

// The GNU build id of the ELF file open at `fd`; empty when it has none or cannot be read.
std::string build_id_of(int fd) {
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (!elf) return {};
  const void* bits = nullptr;
  const ssize_t length = dwelf_elf_gnu_build_id(elf, &bits);
  std::string id = length > 0 ? std::string(static_cast<const char*>(bits), size_t(length)) : std::string();
  elf_end(elf);
  return id;
}

std::string hex_digits(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) out += {kDigits[b >> 4], kDigits[b & 0xF]};
  return out;
}

// The files that may hold a module's code and symbols, best first (the order Symbolizer's comment gives).
std::vector<std::string> candidate_files(const proto::Module& module, const std::string& basename,
                                         const std::vector<std::string>& debug_dirs) {
  std::vector<std::string> files;
  const std::string id = hex_digits(module.build_id());
  // A build id is 20 bytes (SHA-1) as ld writes it; one too long for a file name is no file's.
  if (id.size() > 2 && id.size() + 6 <= NAME_MAX) {
    const std::string relative = "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    for (const std::string& dir : debug_dirs) files.push_back(dir + relative);
    files.push_back("/usr/lib/debug" + relative);
  }
  if (!basename.empty())
    for (const std::string& dir : debug_dirs) files.push_back(dir + "/" + basename);
  files.push_back(module.path());
  return files;
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

  std::vector<std::string> debug_dirs;

  Impl(std::vector<proto::Module> trace_modules, std::vector<std::string> dirs) : debug_dirs(std::move(dirs)) {
    elf_version(EV_CURRENT);
    dwfl = dwfl_begin(&kOfflineCallbacks);
    if (dwfl) dwfl_report_begin(dwfl);
    for (auto& m : trace_modules) {
      LoadedModule loaded{std::move(m), {}, nullptr, false};
      loaded.name = basename_of(loaded.module.path());
      if (dwfl) report(loaded);
      modules.push_back(std::move(loaded));
    }
    if (dwfl) dwfl_report_end(dwfl, nullptr, nullptr);
    // Stable: among modules with one start, the one listed last is found, as in StackTable.
    std::stable_sort(modules.begin(), modules.end(), [](const LoadedModule& a, const LoadedModule& b) {
      return a.module.start() < b.module.start();
    });
  }

  ~Impl() {
    if (dwfl) dwfl_end(dwfl);
  }

  // Reports the first candidate file that is the build that ran (candidate_files) at the module's load bias
  // (dlpi_addr, hence add_p_vaddr). Files that open but carry another build id make a mismatch when none fits.
  void report(LoadedModule& loaded) {
    const std::string& expected = loaded.module.build_id();
    for (const std::string& file : candidate_files(loaded.module, loaded.name, debug_dirs)) {
      std::string real_path;
      const int fd = open_elf(file, &real_path);
      if (fd < 0) continue;
      if (!expected.empty() && build_id_of(fd) != expected) {
        loaded.build_id_mismatch = true;
        close(fd);
        continue;
      }
      // libdwfl keeps the descriptor of a module it reports, and leaves it to us when it fails.
      Dwfl_Module* mod = dwfl_report_elf(dwfl, loaded.name.c_str(), real_path.c_str(), fd,
                                         loaded.module.load_address(), true);
      if (!mod) {
        close(fd);
        return;  // not an ELF file libdwfl can lay out, or an address range another module of the trace holds
      }
      loaded.dwfl_module = mod;
      loaded.build_id_mismatch = false;
      return;
    }
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

Symbolizer::Symbolizer(std::vector<proto::Module> modules, std::vector<std::string> debug_dirs)
    : impl_(std::make_unique<Impl>(std::move(modules), std::move(debug_dirs))) {}
Symbolizer::~Symbolizer() = default;

const NativeFrame& Symbolizer::symbolize(uint64_t return_address) {
  auto it = impl_->cache.find(return_address);
  if (it == impl_->cache.end()) it = impl_->cache.emplace(return_address, impl_->lookup(return_address)).first;
  return it->second;
}

}  // namespace memtrace
