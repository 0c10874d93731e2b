// `memtrace run [-o PATH] -- CMD ARGS...`: replaces itself with CMD (execvp, no shell) with the tracer
// preloaded, and named as the NVTX injection library, so CMD's exit status is the command's own.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"

namespace memtrace {

std::filesystem::path tracer_library_path() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  return (self.parent_path() / ".." / "lib" / "libmemtrace.so").lexically_normal();
}

namespace {

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

// Makes the tracer the NVTX injection library, so that the job's NVTX ranges are recorded (docs/tracing.md, "NVTX
// ranges"). An injection library the job's environment names already (Nsight Systems', say) is passed on in
// MEMTRACE_NVTX_CHAIN: the tracer loads it and hands it every call, so that it still sees every range. When it
// names the tracer itself (memtrace run inside memtrace run), a chain set before is kept as it is.
void use_tracer_as_nvtx_injection(const std::string& library) {
  const char* existing = std::getenv("NVTX_INJECTION64_PATH");
  if (existing && *existing && library != existing) setenv("MEMTRACE_NVTX_CHAIN", existing, 1);
  setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
}

// `memtrace run`, its options parsed: `output` is -o's PATH (empty when not given).
int run(const std::string& output_option, const std::vector<std::string>& program) {
  if (program.empty()) throw UsageError("run needs a command: memtrace run [-o PATH] -- CMD ARGS...");
  std::string output = output_option;

  std::filesystem::path library = tracer_library_path();
  if (library.empty() || !std::filesystem::exists(library)) {
    std::cerr << "memtrace: " << (library.empty() ? std::string("libmemtrace.so") : library.string())
              << ": tracer library not found next to the memtrace executable\n";
    return kExitBadInput;
  }
  if (!preloadable(library.string())) {
    std::cerr
        << "memtrace: " << library.string()
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
  use_tracer_as_nvtx_injection(library.string());
  if (!output.empty()) setenv("MEMTRACE_OUTPUT", output.c_str(), 1);

  std::vector<char*> argv;
  for (const std::string& arg : program) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int error = errno;
  std::cerr << "memtrace: " << argv[0] << ": cannot run: " << std::strerror(error) << '\n';
  return error == ENOENT ? 127 : 126;  // the shell's codes for not found / not executable
}

}  // namespace

RunArgs split_run_args(const std::vector<std::string>& args) {
  RunArgs split;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // CMD without a `--` before it
    split.options.push_back(arg);
    if ((arg == "-o" || arg == "--output") && i + 1 < args.size()) split.options.push_back(args[++i]);
  }
  split.program.assign(args.begin() + long(i), args.end());
  return split;
}

RunCommand add_run(CLI::App& memtrace, std::vector<std::string> program) {
  auto output = std::make_shared<std::string>();
  CLI::App* command = memtrace.add_subcommand(
      "run",
      "run CMD ARGS... with the tracer preloaded (no shell), exit with CMD's status; what follows `--` "
      "or CMD is CMD's own, --help included");
  command
      ->add_option("-o,--output", *output,
                   "the trace's file (%p: the process id); default memtrace-<host>-<pid>.mtrace in the "
                   "working directory")
      ->type_name("PATH")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last -o counts, as a shell user expects
  return [output, program = std::move(program)] { return run(*output, program); };
}

}  // namespace memtrace
