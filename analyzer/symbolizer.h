// Offline symbolization of native return addresses against the module map written in the trace,
// with elfutils' libdwfl: function (demangled), offset, and source file:line where debug info exists.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "memtrace.pb.h"

namespace memtrace {

struct NativeFrame {
  uint64_t address = 0;          // the absolute return address from the trace
  std::string module_path;       // empty when no module of the trace contains the address
  std::string module_name;       // basename of module_path
  uint64_t module_offset = 0;    // address - the module's load address
  std::string function;          // demangled; empty when unknown
  uint64_t function_offset = 0;  // return address - the function's start
  std::string source_file;       // empty without debug info
  uint32_t line = 0;
  bool build_id_mismatch = false;  // the file on disk is not the one that ran: names would be wrong
  bool module_missing = false;     // the module's file could not be opened
  bool in_python_interpreter = false;  // libpython* or the python executable itself
};

class Symbolizer {
 public:
  explicit Symbolizer(std::vector<proto::Module> modules);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Symbolizes a return address. Return addresses point after the call, so the lookup uses
  // address - 1. Results are cached per address.
  const NativeFrame& symbolize(uint64_t return_address);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "foo(int)" for the mangled "_Z3fooi"; the input unchanged when it is not a mangled C++ name.
std::string demangle(const char* name);

}  // namespace memtrace
