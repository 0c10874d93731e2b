// Offline symbolization of native return addresses against the module map written in the trace,
// with elfutils' libdwfl: function (demangled), offset, and source file:line where debug info exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "memtrace.pb.h"

namespace memtrace {

// Files past this size are not opened: libelf maps the whole file, and the trace names it. 4 GiB is well above
// the largest shared objects CUDA jobs load (libtorch_cuda.so, libcublasLt.so: hundreds of MiB to about 2 GiB),
// debug info included, and bounds what a hostile path can make the analyzer map.
inline constexpr uint64_t kMaxElfFileBytes = 4ull << 30;

// Distinct files a Symbolizer reads at most (each holds a descriptor and a mapping until it is destroyed). A large
// PyTorch process maps 1,000 to 2,000 shared objects; a trace that names more files than this is not one run's.
inline constexpr size_t kMaxFilesOpened = 4096;

struct NativeFrame {
  uint64_t address = 0;          // the absolute return address from the trace
  std::string module_path;       // empty when no module of the trace contains the address
  std::string module_name;       // basename of module_path
  uint64_t module_offset = 0;    // address - the module's load address
  std::string function;          // demangled; empty when unknown
  uint64_t function_offset = 0;  // return address - the function's start
  std::string source_file;       // empty without debug info
  uint32_t line = 0;
  bool build_id_mismatch = false;      // the file on disk is not the one that ran: names would be wrong
  bool module_missing = false;         // the module's file could not be opened
  bool in_python_interpreter = false;  // libpython* or the python executable itself
};

// Which files it reads: the module paths come from the trace, which anyone can write, so a module's file is
// opened only when it is a regular file of at most kMaxElfFileBytes that starts with the ELF magic and lies
// outside /proc, /sys and /dev (a path naming a FIFO, a device, a directory or a kernel file gives a module
// missing, without blocking or reading it). For a module with a build id, the files tried are, in order:
//   <dir>/.build-id/<first 2 hex digits>/<the other digits>.debug for each of `debug_dirs`, then /usr/lib/debug;
//   <dir>/<the module's basename> for each of `debug_dirs` (symbol files copied from the machine that recorded);
//   the recorded path;
// and the first whose build id matches is used. A module without a build id takes the first of the last two kinds
// that opens. A module whose files all carry another build id is a build id mismatch.
// When it reads them: a module's files are looked for when the first frame inside it is symbolized, never for
// modules no frame uses; modules of one recorded path and build id share what the first one found, and a file
// (one device and inode) is read once, whatever number of modules name it at whatever load addresses. Past
// `max_files_opened` distinct files, frames of modules whose file would be another are not symbolized (their
// frames read as of a missing module) and the modules are counted (modules_not_opened).
class Symbolizer {
 public:
  explicit Symbolizer(std::vector<proto::Module> modules, std::vector<std::string> debug_dirs = {},
                      size_t max_files_opened = kMaxFilesOpened);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Symbolizes a return address. Return addresses point after the call, so the lookup uses
  // address - 1. Results are cached per address.
  const NativeFrame& symbolize(uint64_t return_address);

  // Distinct files (device and inode) whose ELF was read so far, of the build that ran or not.
  size_t files_opened() const;
  // Modules some frame fell in whose file was not opened because max_files_opened files already were.
  uint64_t modules_not_opened() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "foo(int)" for the mangled "_Z3fooi"; the input unchanged when it is not a mangled C++ name.
std::string demangle(const char* name);

}  // namespace memtrace
