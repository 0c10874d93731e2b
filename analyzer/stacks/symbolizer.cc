#include "stacks/symbolizer.h"

#include <cxxabi.h>
#include <elf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "stacks/stack_table.h"

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

// An ELF file a trace or the user names, opened: its descriptor, its real path in `*real_path` and its status in
// `*stat_out` (the device and inode tell files apart); -1 when it
// is not a regular file of at most kMaxElfFileBytes starting with the ELF magic, or lies in /proc, /sys or /dev
// (checked on the path as given, on it with symlinks and ".." resolved, and on the opened file's filesystem, since
// a symlink can change between the two). O_NONBLOCK: opening a FIFO that was put there meanwhile does not wait for a
// writer. What is checked is the descriptor libdwfl reads, so nothing can swap the file after the checks.
int open_elf(const std::string& path, std::string* real_path, struct stat* stat_out) {
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
                   uint64_t(st.st_size) <= kMaxElfFileBytes && fstatfs(fd, &fs) == 0 && fs.f_type != PROC_SUPER_MAGIC &&
                   fs.f_type != SYSFS_MAGIC && pread(fd, magic, SELFMAG, 0) == SELFMAG &&
                   std::memcmp(magic, ELFMAG, SELFMAG) == 0;
  if (!elf) {
    close(fd);
    return -1;
  }
  *real_path = resolved;
  *stat_out = st;
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
    uint64_t address;  // in the file: a module's load bias not applied
    uint64_t size;
    const char* name;  // owned by libdwfl's copy of the ELF
  };
  // One real file (one device and inode) whose ELF was read, shared by every Module record that names it,
  // whatever their load addresses: the file is laid out at bias 0 in a Dwfl session of its own, and a frame is
  // looked up at its offset in the file (address - its module's bias), so one function table serves them all
  // and modules of different files can never collide in one address space.
  struct OpenedFile {
    std::string build_id;
    Dwfl* dwfl = nullptr;                // null when libdwfl could not lay the file out
    Dwfl_Module* dwfl_module = nullptr;  // owned by `dwfl`
    bool fixed_address = false;          // ET_EXEC: placed at its link-time addresses, whatever the record says
    // Function symbols sorted by address, built on first use: libdwfl's own address lookup scans the
    // whole symbol table on every call, far too slow for libraries with 100,000s of symbols.
    bool symbols_loaded = false;
    std::vector<FunctionSymbol> functions;
    ~OpenedFile() {
      if (dwfl) dwfl_end(dwfl);
    }
  };
  // Which file a module's frames are looked up in: found on the first frame inside the module (resolve).
  struct Resolution {
    OpenedFile* file = nullptr;  // null when missing, of another build, or not opened (the limit)
    bool build_id_mismatch = false;
    bool not_opened = false;
  };
  struct LoadedModule {
    proto::Module module;
    std::string name;
    bool resolved = false;
    Resolution resolution;
  };
  struct FileKey {
    dev_t device;
    ino_t inode;
    bool operator<(const FileKey& o) const { return device != o.device ? device < o.device : inode < o.inode; }
  };

  std::vector<LoadedModule> modules;  // sorted by start
  std::unordered_map<uint64_t, NativeFrame> cache;
  std::vector<std::string> debug_dirs;
  size_t max_files_opened;
  std::map<FileKey, std::unique_ptr<OpenedFile>> files;  // every file whose ELF was read
  size_t files_read = 0;                                 // ELF reads: files.size() unless one was read twice
  // Modules with one recorded path and build id try the same files: the first one's resolution serves the rest.
  std::unordered_map<std::string, Resolution> by_path_and_build_id;
  uint64_t modules_not_opened = 0;

  Impl(std::vector<proto::Module> trace_modules, std::vector<std::string> dirs, size_t max_files)
      : debug_dirs(std::move(dirs)), max_files_opened(max_files) {
    elf_version(EV_CURRENT);
    modules.reserve(trace_modules.size());
    for (auto& m : trace_modules) {
      LoadedModule loaded{std::move(m), {}, false, {}};
      loaded.name = basename_of(loaded.module.path());
      modules.push_back(std::move(loaded));
    }
    // Stable: among modules with one start, the one listed last is found, as in StackTable.
    std::stable_sort(modules.begin(), modules.end(),
                     [](const LoadedModule& a, const LoadedModule& b) { return a.module.start() < b.module.start(); });
  }

  // The file of a module, found and opened the first time a frame falls inside it, so that modules no frame
  // uses cost no file access; then cached for every module of the same recorded path and build id.
  const Resolution& resolution_of(LoadedModule& loaded) {
    if (!loaded.resolved) {
      loaded.resolved = true;
      std::string key = loaded.module.path();
      key.push_back('\0');
      key += loaded.module.build_id();
      auto it = by_path_and_build_id.find(key);
      if (it == by_path_and_build_id.end()) it = by_path_and_build_id.emplace(std::move(key), resolve(loaded)).first;
      loaded.resolution = it->second;
      if (loaded.resolution.not_opened) ++modules_not_opened;
    }
    return loaded.resolution;
  }

  // The first candidate file that is the build that ran (candidate_files). Files that open but carry another
  // build id make a mismatch when none fits. A file already read (same device and inode) is not read again.
  Resolution resolve(const LoadedModule& loaded) {
    Resolution result;
    const std::string& expected = loaded.module.build_id();
    for (const std::string& path : candidate_files(loaded.module, loaded.name, debug_dirs)) {
      std::string real_path;
      struct stat st;
      const int fd = open_elf(path, &real_path, &st);
      if (fd < 0) continue;
      OpenedFile* file = nullptr;
      if (auto known = files.find(FileKey{st.st_dev, st.st_ino}); known != files.end()) {
        close(fd);
        file = known->second.get();
      } else if (files_read >= max_files_opened) {
        close(fd);
        result.not_opened = true;  // bounds the descriptors and mappings a trace can make us hold
        return result;
      } else {
        ++files_read;
        file = files.emplace(FileKey{st.st_dev, st.st_ino}, open_file(fd, real_path, loaded.name)).first->second.get();
      }
      if (!expected.empty() && file->build_id != expected) {
        result.build_id_mismatch = true;
        continue;
      }
      if (!file->dwfl_module) return result;  // not an ELF file libdwfl can lay out
      result.file = file;
      result.build_id_mismatch = false;
      return result;
    }
    return result;
  }

  // Reads the ELF file open at `fd` (taking the descriptor): its build id, and libdwfl's module for it at bias 0
  // (dlpi_addr, hence add_p_vaddr).
  static std::unique_ptr<OpenedFile> open_file(int fd, const std::string& real_path, const std::string& name) {
    auto file = std::make_unique<OpenedFile>();
    file->build_id = build_id_of(fd);
    file->dwfl = dwfl_begin(&kOfflineCallbacks);
    if (!file->dwfl) {
      close(fd);
      return file;
    }
    dwfl_report_begin(file->dwfl);
    // libdwfl keeps the descriptor of a module it reports, and leaves it to us when it fails.
    file->dwfl_module = dwfl_report_elf(file->dwfl, name.c_str(), real_path.c_str(), fd, 0, true);
    if (!file->dwfl_module) close(fd);
    dwfl_report_end(file->dwfl, nullptr, nullptr);
    if (file->dwfl_module) {
      GElf_Addr bias = 0;
      Elf* elf = dwfl_module_getelf(file->dwfl_module, &bias);
      GElf_Ehdr ehdr;
      file->fixed_address = elf && gelf_getehdr(elf, &ehdr) && ehdr.e_type == ET_EXEC;
    }
    return file;
  }

  static void load_functions(OpenedFile& file) {
    file.symbols_loaded = true;
    int count = dwfl_module_getsymtab(file.dwfl_module);
    // Globals first among symbols at one address, as libdwfl prefers them too.
    std::vector<std::pair<FunctionSymbol, int>> ranked;
    for (int i = 1; i < count; ++i) {
      GElf_Sym sym;
      GElf_Addr address = 0;
      const char* name = dwfl_module_getsym_info(file.dwfl_module, i, &sym, &address, nullptr, nullptr, nullptr);
      int type = GELF_ST_TYPE(sym.st_info);
      if (!name || !*name || sym.st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC)) continue;
      int rank = GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? 0 : GELF_ST_BIND(sym.st_info) == STB_WEAK ? 1 : 2;
      ranked.push_back({FunctionSymbol{address, sym.st_size, name}, rank});
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      return a.first.address != b.first.address ? a.first.address < b.first.address : a.second < b.second;
    });
    for (const auto& [symbol, rank] : ranked)
      if (file.functions.empty() || file.functions.back().address != symbol.address) file.functions.push_back(symbol);
  }

  // The function containing `pc` (an address in the file), or nullptr.
  static const FunctionSymbol* function_containing(OpenedFile& file, uint64_t pc) {
    if (!file.symbols_loaded) load_functions(file);
    auto it = std::upper_bound(file.functions.begin(), file.functions.end(), pc,
                               [](uint64_t a, const FunctionSymbol& f) { return a < f.address; });
    if (it == file.functions.begin()) return nullptr;
    --it;
    // A symbol without a size covers up to the next one.
    if (it->size == 0 ? std::next(it) != file.functions.end() && pc >= std::next(it)->address
                      : pc >= it->address + it->size)
      return nullptr;
    return &*it;
  }

  LoadedModule* module_containing(uint64_t address) {
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
    const Resolution& resolution = resolution_of(*loaded);
    frame.build_id_mismatch = resolution.build_id_mismatch;
    if (!resolution.file) {
      frame.module_missing = !resolution.build_id_mismatch;
      return frame;
    }
    OpenedFile& file = *resolution.file;
    // The module's load bias: libdwfl places an ET_EXEC file at its link-time addresses whatever base it is
    // given, so there the return address is already the file's address.
    const uint64_t bias = file.fixed_address ? 0 : loaded->module.load_address();
    const uint64_t pc = return_address - bias - 1;  // inside the call instruction
    if (const FunctionSymbol* function = function_containing(file, pc)) {
      // Versioned dynamic symbols come back as "name@@VERSION": the version is not part of the name.
      std::string plain(function->name);
      if (size_t at = plain.find('@'); at != std::string::npos && at > 0) plain.resize(at);
      frame.function = demangle(plain.c_str());
      frame.function_offset = return_address - bias - function->address;
    }
    if (Dwfl_Line* line = dwfl_module_getsrc(file.dwfl_module, pc)) {
      int lineno = 0;
      const char* source = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (source) frame.source_file = source;
      if (lineno > 0) frame.line = uint32_t(lineno);
    }
    return frame;
  }
};

Symbolizer::Symbolizer(std::vector<proto::Module> modules, std::vector<std::string> debug_dirs, size_t max_files_opened)
    : impl_(std::make_unique<Impl>(std::move(modules), std::move(debug_dirs), max_files_opened)) {}
Symbolizer::~Symbolizer() = default;

const NativeFrame& Symbolizer::symbolize(uint64_t return_address) {
  auto it = impl_->cache.find(return_address);
  if (it == impl_->cache.end()) it = impl_->cache.emplace(return_address, impl_->lookup(return_address)).first;
  return it->second;
}

size_t Symbolizer::files_opened() const { return impl_->files_read; }
uint64_t Symbolizer::modules_not_opened() const { return impl_->modules_not_opened; }

}  // namespace memtrace
