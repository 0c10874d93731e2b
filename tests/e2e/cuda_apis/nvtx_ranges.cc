// NVTX ranges around allocations, through the NVTX v3 header-only API (the job's own NVTX instance, which loads
// $NVTX_INJECTION64_PATH at its first call). check_nvtx_ranges.py holds the expected records.
// Prints the values the job got back: "push depth D" for each push, "range id N" for the start range.
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <cstring>

#include "e2e_util.h"

int main() {
  // Before the first CUDA call: the trace has not started, so none of these is recorded.
  std::printf("push depth %d\n", nvtxRangePushA("before-cuda"));
  nvtxMarkA("early");
  nvtxRangePop();

  void *first, *a, *b, *c;
  E2E_OK(cudaMalloc(&first, 1 * kMiB));  // event 0: the trace starts here
  std::printf("push depth %d\n", nvtxRangePushA("step"));
  std::printf("push depth %d\n", nvtxRangePushA("forward"));
  E2E_OK(cudaMalloc(&a, 2 * kMiB));  // event 1
  E2E_OK(cudaMalloc(&b, 4 * kMiB));  // event 2
  nvtxRangePop();
  std::printf("push depth %d\n", nvtxRangePushW(L"backward\u00e9"));  // wide: "backwardé" in UTF-8
  E2E_OK(cudaFree(b));  // event 3
  nvtxRangePop();
  nvtxRangePop();

  nvtxEventAttributes_t attributes;
  std::memset(&attributes, 0, sizeof attributes);
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "optimizer";
  nvtxRangeId_t id = nvtxRangeStartEx(&attributes);
  std::printf("range id %llu\n", static_cast<unsigned long long>(id));
  E2E_OK(cudaMalloc(&c, 8 * kMiB));  // event 4
  nvtxRangeEnd(id);

  char long_name[301];
  std::memset(long_name, 'x', 300);
  long_name[300] = 0;
  nvtxMarkA("ctl\x1b[2J");                                  // a name with control bytes, kept as it is
  std::printf("push depth %d\n", nvtxRangePushA("step"));  // the name again: interned once
  E2E_OK(cudaFree(a));                                     // event 5
  nvtxRangePop();
  std::printf("push depth %d\n", nvtxRangePushA(long_name));  // never popped; 255 bytes kept
  E2E_OK(cudaFree(c));                                         // event 6
  std::printf("pop of nothing %d\n", nvtxRangePop() + nvtxRangePop());  // the second pop has no push
  return 0;
}
