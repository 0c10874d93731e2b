// A host program that uses memtrace.proto itself (its own generated classes and protobuf runtime) while
// being traced: memtrace's library carries no protobuf runtime and registers no schema, so the host's
// registration meets no "File already exists in database" and no crash.
// Built twice: against the project's lite classes (target memtrace_proto) and against full-runtime classes
// generated from a copy of memtrace.proto (their descriptor is registered in the generated pool at load).
// Events: alloc 4 MiB, free 4 MiB (2 events).
#include <cuda_runtime_api.h>

#include <string>

#include "e2e_util.h"
#include "memtrace.pb.h"

int main() {
  memtrace::proto::Record record;
  record.mutable_start()->set_pid(42);
  record.mutable_start()->add_argv("host");
  std::string bytes = record.SerializeAsString();
  memtrace::proto::Record parsed;
  if (!parsed.ParseFromString(bytes) || parsed.start().pid() != 42) return 4;
  std::printf("round trip of %zu bytes ok\n", bytes.size());
  void* p;
  E2E_OK(cudaMalloc(&p, 4 * kMiB));
  E2E_OK(cudaFree(p));
  return 0;
}
