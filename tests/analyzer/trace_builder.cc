#include "trace_builder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace memtrace::test {
namespace {

std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() / ("memtrace-analyzer-tests-" + std::to_string(getpid()));
}

// Removes this process's temporary files once its tests have run.
class TempDirCleanup : public testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(temp_dir(), ignored);
  }
};
[[maybe_unused]] testing::Environment* const cleanup = testing::AddGlobalTestEnvironment(new TempDirCleanup);

}  // namespace

std::string temp_path(const std::string& name) {
  std::filesystem::create_directories(temp_dir());
  return (temp_dir() / name).string();
}

std::string memtrace_stdout(const std::string& args) {
  std::string out = temp_path("memtrace.out");
  int status = std::system((std::string(MEMTRACE_BIN) + " " + args + " >" + out).c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << args;
  std::ifstream in(out, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

MemtraceRun run_memtrace_binary(const std::string& args) {
  std::string out = temp_path("memtrace-run.out"), err = temp_path("memtrace-run.err");
  int status = std::system((std::string(MEMTRACE_BIN) + " " + args + " >" + out + " 2>" + err).c_str());
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  MemtraceRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(out);
  run.err = slurp(err);
  return run;
}

}  // namespace memtrace::test
