// Records far more than the tracer's buffers hold while the checker keeps the tracer's writer thread
// stopped (ptrace), so that events must be dropped and counted.
// Usage: e2e_flood DIR PAIRS
//   alloc 4 MiB (tracing starts), create DIR/started, wait for DIR/go;
//   PAIRS x (alloc 64 KiB, free), create DIR/done, wait for DIR/finish;
//   free the 4 MiB, return 0.
// Events made: 1 + 2 x PAIRS + 1.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "e2e_util.h"

namespace {

void create(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) std::exit(4);
  close(fd);
}

void wait_for(const std::string& path) {
  while (access(path.c_str(), F_OK) != 0) usleep(1000);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  std::string dir = argv[1];
  int pairs = std::atoi(argv[2]);
  void* kept;
  E2E_OK(cudaMalloc(&kept, 4 * kMiB));
  create(dir + "/started");
  wait_for(dir + "/go");
  for (int i = 0; i < pairs; i++) {
    void* p = nullptr;
    if (cudaMalloc(&p, 65536) != cudaSuccess || cudaFree(p) != cudaSuccess) return 3;
  }
  create(dir + "/done");
  wait_for(dir + "/finish");
  E2E_OK(cudaFree(kept));
  return 0;
}
