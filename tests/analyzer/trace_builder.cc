#include "trace_builder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace memtrace::test {

std::string temp_path(const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("memtrace-analyzer-tests-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

}  // namespace memtrace::test
