// A write error in the middle of a run: the file size limit (RLIMIT_FSIZE) is lowered so that the trace
// file cannot grow by a whole chunk. SIGXFSZ is ignored, so the failed write() answers EFBIG.
// Usage: e2e_write_error TRACE_PATH SLEEP_MS
//   phase 1: alloc 4 MiB, alloc 8 MiB, free 4 MiB (3 events); sleep SLEEP_MS (several flush intervals:
//            these 3 events are written as whole chunks);
//   then:    RLIMIT_FSIZE = size of TRACE_PATH + 16 bytes (the next chunk can add 16 bytes at most);
//   phase 2: 100 x (alloc 1 MiB, free); sleep SLEEP_MS (their chunk fails);
//   phase 3: 100 more pairs (tracing has stopped), then "done" and exit status 0.
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "e2e_util.h"

namespace {

void pairs(int n) {
  for (int i = 0; i < n; i++) {
    void* p = nullptr;
    if (cudaMalloc(&p, kMiB) != cudaSuccess || cudaFree(p) != cudaSuccess) std::exit(3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  useconds_t sleep_us = static_cast<useconds_t>(std::atoi(argv[2])) * 1000;
  signal(SIGXFSZ, SIG_IGN);
  void *a, *b;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  E2E_OK(cudaMalloc(&b, 8 * kMiB));
  E2E_OK(cudaFree(a));
  usleep(sleep_us);
  struct stat st {};
  if (stat(argv[1], &st) != 0) {
    std::perror(argv[1]);
    return 4;
  }
  rlimit limit{static_cast<rlim_t>(st.st_size) + 16, static_cast<rlim_t>(st.st_size) + 16};
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 4;
  std::printf("file size after phase 1: %lld bytes\n", static_cast<long long>(st.st_size));
  pairs(100);
  usleep(sleep_us);
  pairs(100);
  usleep(sleep_us);
  std::printf("done\n");
  return 0;
}
