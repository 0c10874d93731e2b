// `memtrace run [-o PATH] -- CMD ARGS...`: replaces itself with CMD (execvp, no shell) with the tracer
// preloaded, so CMD's exit status is the command's own.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"

namespace memtrace {
namespace {

// The tracer is installed next to the analyzer: <prefix>/bin/memtrace and <prefix>/lib/libmemtrace.so.
std::filesystem::path tracer_library_path() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  return (self.parent_path() / ".." / "lib" / "libmemtrace.so").lexically_normal();
}

// LD_PRELOAD splits its list at spaces and colons: a library path holding either is silently not loaded.
bool preloadable(const std::string& path) { return path.find_first_of(" :\t") == std::string::npos; }

// The output path the tracer will be given, made absolute (the command may change directory before its
// first CUDA call). Empty, with an error printed, when it cannot work: its directory does not exist, or it names
// a directory or a device (the tracer never overwrites a file: it would write PATH.1 beside it). /dev/null, which
// the tracer treats as "trace without writing", is the one device taken.
std::string checked_output_path(const std::string& output) {
  std::filesystem::path path = std::filesystem::absolute(output).lexically_normal();
  std::error_code error;
  std::filesystem::path directory = path.parent_path();
  if (!std::filesystem::is_directory(directory, error)) {
    std::cerr << "memtrace: " << output << ": directory " << directory.string() << " does not exist\n";
    return {};
  }
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (std::filesystem::is_directory(status)) {
    std::cerr << "memtrace: " << output << ": is a directory; -o takes the trace's file name\n";
    return {};
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status) && path != "/dev/null") {
    std::cerr << "memtrace: " << output << ": not a regular file; -o takes the trace's file name\n";
    return {};
  }
  return path.string();
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  std::string output;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    if (args[i] == "--") {
      ++i;
      break;
    }
    if (args[i] == "-o" || args[i] == "--output") {
      if (i + 1 == args.size()) throw UsageError(args[i] + " needs a path");
      output = args[++i];
    } else if (args[i].rfind("-", 0) == 0) {
      throw UsageError("unknown run option '" + args[i] + "'");
    } else {
      break;  // CMD without a `--` before it
    }
  }
  if (i >= args.size()) throw UsageError("run needs a command: memtrace run [-o PATH] -- CMD ARGS...");

  std::filesystem::path library = tracer_library_path();
  if (library.empty() || !std::filesystem::exists(library)) {
    std::cerr << "memtrace: " << (library.empty() ? std::string("libmemtrace.so") : library.string())
              << ": tracer library not found next to the memtrace executable\n";
    return kExitBadInput;
  }
  if (!preloadable(library.string())) {
    std::cerr << "memtrace: " << library.string()
              << ": the tracer's path holds a space or a colon, which LD_PRELOAD cannot carry; install memtrace elsewhere\n";
    return kExitBadInput;
  }
  if (!output.empty()) {
    output = checked_output_path(output);
    if (output.empty()) return kExitBadInput;
  }
  std::string preload = library.string();
  if (const char* existing = std::getenv("LD_PRELOAD"); existing && *existing) preload += ":" + std::string(existing);
  setenv("LD_PRELOAD", preload.c_str(), 1);
  if (!output.empty()) setenv("MEMTRACE_OUTPUT", output.c_str(), 1);

  std::vector<char*> argv;
  for (size_t j = i; j < args.size(); ++j) argv.push_back(const_cast<char*>(args[j].c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int error = errno;
  std::cerr << "memtrace: " << argv[0] << ": cannot run: " << std::strerror(error) << '\n';
  return error == ENOENT ? 127 : 126;  // the shell's codes for not found / not executable
}

}  // namespace memtrace
