// The fake driver's CUDA graphs, as far as memory goes: stream capture (begin, query, end), graphs with
// memory nodes, instantiation and launch. Nothing runs: a launch only checks its executable graph. Capture
// ids count up from 1 in the order captures begin; a stream is identified by its handle value, and stream 0
// through a _ptsz entry point is the per-thread stream (CU_STREAM_PER_THREAD).
#include <map>
#include <mutex>

#include "device_memory.h"
#include "driver_internal.h"

using namespace fakecuda;

struct CUgraph_st {
  int nodes;
};
struct CUgraphNode_st {
  int kind;
};
struct CUgraphExec_st {
  CUgraph graph;
};

extern "C" {
decltype(cuStreamBeginCapture_v2) cuStreamBeginCapture_v2_ptsz;
decltype(cuStreamGetCaptureInfo_v3) cuStreamGetCaptureInfo_v3_ptsz;
decltype(cuStreamEndCapture) cuStreamEndCapture_ptsz;
decltype(cuGraphInstantiateWithParams) cuGraphInstantiateWithParams_ptsz;
decltype(cuGraphLaunch) cuGraphLaunch_ptsz;
}

namespace {

struct Capture {
  uint64_t id;
  CUgraph graph;
};

struct Captures {
  std::mutex lock;
  std::map<uintptr_t, Capture> by_stream;
  uint64_t next_id = 1;
};

Captures& captures() {
  static Captures* c = new Captures();
  return *c;
}

uintptr_t stream_key(CUstream stream, bool per_thread_stream) {
  if (per_thread_stream && stream == nullptr) return reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD);
  if (stream == CU_STREAM_LEGACY) return 0;
  return reinterpret_cast<uintptr_t>(stream);
}

CUresult begin_capture(CUstream stream, bool per_thread_stream) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Captures& c = captures();
  std::lock_guard<std::mutex> guard(c.lock);
  uintptr_t key = stream_key(stream, per_thread_stream);
  if (c.by_stream.count(key)) return CUDA_ERROR_ILLEGAL_STATE;
  c.by_stream[key] = Capture{c.next_id++, new CUgraph_st{0}};
  return CUDA_SUCCESS;
}

CUresult capture_info(CUstream stream, bool per_thread_stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                      CUgraph* graph) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  Captures& c = captures();
  std::lock_guard<std::mutex> guard(c.lock);
  auto it = c.by_stream.find(stream_key(stream, per_thread_stream));
  *status = it == c.by_stream.end() ? CU_STREAM_CAPTURE_STATUS_NONE : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (it != c.by_stream.end()) {
    if (id) *id = it->second.id;
    if (graph) *graph = it->second.graph;
  }
  return CUDA_SUCCESS;
}

CUresult end_capture(CUstream stream, bool per_thread_stream, CUgraph* graph) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  Captures& c = captures();
  std::lock_guard<std::mutex> guard(c.lock);
  auto it = c.by_stream.find(stream_key(stream, per_thread_stream));
  if (it == c.by_stream.end()) return CUDA_ERROR_ILLEGAL_STATE;
  *graph = it->second.graph;
  c.by_stream.erase(it);
  return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* exec, CUgraph graph) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!exec || !graph) return CUDA_ERROR_INVALID_VALUE;
  *exec = new CUgraphExec_st{graph};
  return CUDA_SUCCESS;
}

CUresult launch(CUgraphExec exec) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return exec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

namespace fakecuda {

bool stream_capturing(CUstream stream, bool per_thread_stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return capture_info(stream, per_thread_stream, &status, nullptr, nullptr) == CUDA_SUCCESS &&
         status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

}  // namespace fakecuda

extern "C" {

CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode) { return begin_capture(stream, false); }
CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode) { return begin_capture(stream, true); }

CUresult cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                   const CUgraphNode** dependencies, const CUgraphEdgeData** edges, size_t* count) {
  if (dependencies) *dependencies = nullptr;
  if (edges) *edges = nullptr;
  if (count) *count = 0;
  return capture_info(stream, false, status, id, graph);
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                        const CUgraphNode** dependencies, const CUgraphEdgeData** edges,
                                        size_t* count) {
  if (dependencies) *dependencies = nullptr;
  if (edges) *edges = nullptr;
  if (count) *count = 0;
  return capture_info(stream, true, status, id, graph);
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) { return end_capture(stream, false, graph); }
CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) { return end_capture(stream, true, graph); }

CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!graph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *graph = new CUgraph_st{0};
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  delete graph;
  return CUDA_SUCCESS;
}

// The node's address is reserved now (never charged: the double runs no graph).
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!node || !graph || !params || params->bytesize == 0 ||
      params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || !device_valid(params->poolProps.location.id))
    return CUDA_ERROR_INVALID_VALUE;
  uintptr_t address = memory_allocate(params->poolProps.location.id, params->bytesize, MemoryKind::kGraph);
  if (!address) return CUDA_ERROR_OUT_OF_MEMORY;
  params->dptr = address;
  graph->nodes++;
  *node = new CUgraphNode_st{1};
  return CUDA_SUCCESS;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t, CUdeviceptr pointer) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!node || !graph || pointer == 0) return CUDA_ERROR_INVALID_VALUE;
  graph->nodes++;
  *node = new CUgraphNode_st{2};
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  return instantiate(exec, graph);
}
CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS*) {
  return instantiate(exec, graph);
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS*) {
  return instantiate(exec, graph);
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (!exec) return CUDA_ERROR_INVALID_VALUE;
  delete exec;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream) { return launch(exec); }
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream) { return launch(exec); }

}  // extern "C"
