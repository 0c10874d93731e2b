// The end-of-trace line where the job moved or lost its stderr (check_end_line.py):
//   end_line_cases chdir        cudaMalloc 1 MiB (1 event), chdir("/"), return 0: the line must still name the
//                               trace by the path it was created at, with its size.
//   end_line_cases stderr_gone  cudaMalloc 1 MiB, then 500 ms for the checker to close the read end of stderr's
//                               pipe, return 0: untraced the job exits 0, and the tracer's line must not kill it
//                               with SIGPIPE.
#include <cuda_runtime_api.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* p = nullptr;
  E2E_OK(cudaMalloc(&p, kMiB));
  if (strcmp(argv[1], "chdir") == 0) return chdir("/") == 0 ? 0 : 3;
  usleep(500000);
  return 0;
}
