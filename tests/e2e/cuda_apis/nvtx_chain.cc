// A second NVTX injection library, chained behind libmemtrace.so (MEMTRACE_NVTX_CHAIN): counts the calls it gets
// and answers with values of its own (push depth 40 + its depth, range ids from 9000), so that the check can tell
// that the job got them. At exit writes "pushA N pushW N pop N startEx N end N markA N" to $E2E_NVTX_CHAIN_REPORT.
#define NVTX_NO_IMPL  // a tool: the types only
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>

namespace {

int push_a_calls, push_w_calls, pop_calls, start_ex_calls, end_calls, mark_a_calls, depth;

int push_a(const char*) { return push_a_calls++, 40 + depth++; }
int push_w(const wchar_t*) { return push_w_calls++, 40 + depth++; }
int pop() { return pop_calls++, depth > 0 ? 40 + --depth : -1; }
nvtxRangeId_t start_ex(const nvtxEventAttributes_t*) { return 9000 + nvtxRangeId_t(start_ex_calls++); }
void end(nvtxRangeId_t) { end_calls++; }
void mark_a(const char*) { mark_a_calls++; }

void install(NvtxFunctionTable table, unsigned last, unsigned id, NvtxFunctionPointer f) {
  if (id <= last) *table[id] = f;
}

__attribute__((destructor)) void report() {
  const char* path = std::getenv("E2E_NVTX_CHAIN_REPORT");
  if (!path) return;
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "pushA %d pushW %d pop %d startEx %d end %d markA %d\n", push_a_calls, push_w_calls, pop_calls,
                 start_ex_calls, end_calls, mark_a_calls);
    std::fclose(f);
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  auto callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned last = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &last)) return 0;
  install(table, last, NVTX_CBID_CORE_RangePushA, reinterpret_cast<NvtxFunctionPointer>(push_a));
  install(table, last, NVTX_CBID_CORE_RangePushW, reinterpret_cast<NvtxFunctionPointer>(push_w));
  install(table, last, NVTX_CBID_CORE_RangePop, reinterpret_cast<NvtxFunctionPointer>(pop));
  install(table, last, NVTX_CBID_CORE_RangeStartEx, reinterpret_cast<NvtxFunctionPointer>(start_ex));
  install(table, last, NVTX_CBID_CORE_RangeEnd, reinterpret_cast<NvtxFunctionPointer>(end));
  install(table, last, NVTX_CBID_CORE_MarkA, reinterpret_cast<NvtxFunctionPointer>(mark_a));
  return 1;
}
