// Test-only: prints every Event of a trace as one JSON object per line, with the field names of
// proto/memtrace.proto (enums by their value names), plus "has_stack": whether its stack_id names a Stack
// record of the file. The checkers of the memory-kind tests compare these lines to the exact sequence a
// program must produce. Usage: dump_events TRACE. Exit status 1 (one line on stderr) for a bad trace.
#include <cstdio>
#include <exception>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace_reader.h"

namespace {

nlohmann::json event_json(const memtrace::proto::Event& e) {
  namespace p = memtrace::proto;
  nlohmann::json j = {
      {"kind", p::EventKind_Name(e.kind())},   {"layer", p::Layer_Name(e.layer())},
      {"api", p::Api_Name(e.api())},           {"memory", p::Memory_Name(e.memory())},
      {"tid", e.tid()},                        {"device", e.device()},
      {"stream", e.stream()},                  {"address", e.address()},
      {"size", e.size()},                      {"result", e.result()},
      {"stack_id", e.stack_id()},              {"handle", e.handle()},
      {"graph", e.graph()},                    {"capture_id", e.capture_id()},
      {"device_free_bytes", e.device_free_bytes()}, {"device_total_bytes", e.device_total_bytes()},
      {"context", e.context()},
  };
  if (e.has_process_used_bytes()) j["process_used_bytes"] = e.process_used_bytes();
  if (e.has_other_processes_used_bytes()) j["other_processes_used_bytes"] = e.other_processes_used_bytes();
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dump_events TRACE\n");
    return 2;
  }
  std::set<uint64_t> stacks;
  std::vector<nlohmann::json> events;
  try {
    memtrace::read_trace(argv[1], [&](const memtrace::proto::Record& record) {
      if (record.has_stack()) stacks.insert(record.stack().id());
      if (record.has_event()) events.push_back(event_json(record.event()));
    });
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dump_events: %s: %s\n", argv[1], error.what());
    return 1;
  }
  // Stacks are written before the events that use them, but a reader resolves them once the file is read.
  for (nlohmann::json& e : events) {
    e["has_stack"] = stacks.count(e["stack_id"].get<uint64_t>()) != 0;
    std::printf("%s\n", e.dump().c_str());
  }
  return 0;
}
