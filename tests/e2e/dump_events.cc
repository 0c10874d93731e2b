// Test-only: prints every Event of a trace as one JSON object per line, with the field names of
// proto/memtrace.proto (enums by their value names), plus "has_stack": whether its stack_id names a Stack
// record of the file. The checkers of the memory-kind tests compare these lines to the exact sequence a
// program must produce. Usage: dump_events TRACE [--frames]. With --frames, an event with a stack also gets
// "native_frames" and "python_frames": how many of each its Stack record holds, and "native_frames_cut" and
// "python_frames_cut": the record's cut flags. With --start, prints instead the TraceStart's identity fields
// ({"record": "start", "pid", ..., "rank", "local_rank", "world_size" where present, "job_id", "job_id_source"})
// and each Device record ({"record": "device", "ordinal", "uuid" in lowercase hex, "name", "total_bytes"}), one
// line each in file order. Exit status 1 (one line on stderr) for a bad trace.
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "read/trace_reader.h"

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

nlohmann::json start_json(const memtrace::proto::TraceStart& s) {
  nlohmann::json j = {{"record", "start"},
                      {"pid", s.pid()},
                      {"job_id", s.job_id()},
                      {"job_id_source", memtrace::proto::TraceStart::JobIdSource_Name(s.job_id_source())}};
  if (s.has_rank()) j["rank"] = s.rank();
  if (s.has_local_rank()) j["local_rank"] = s.local_rank();
  if (s.has_world_size()) j["world_size"] = s.world_size();
  return j;
}

nlohmann::json device_json(const memtrace::proto::Device& d) {
  std::string uuid;
  for (unsigned char c : d.uuid()) {
    const char* digits = "0123456789abcdef";
    uuid += digits[c >> 4];
    uuid += digits[c & 15];
  }
  return {{"record", "device"}, {"ordinal", d.ordinal()}, {"uuid", uuid}, {"name", d.name()},
          {"total_bytes", d.total_bytes()}};
}

}  // namespace

// Python frame ids carry this bit in Stack.frames (proto/memtrace.proto).
constexpr uint64_t kPythonFrameBit = uint64_t{1} << 63;

struct FrameCounts {
  int native = 0, python = 0;
  bool native_cut = false, python_cut = false;
};

int main(int argc, char** argv) {
  bool frames = argc == 3 && std::string_view(argv[2]) == "--frames";
  bool start = argc == 3 && std::string_view(argv[2]) == "--start";
  if (argc != 2 && !frames && !start) {
    std::fprintf(stderr, "usage: dump_events TRACE [--frames | --start]\n");
    return 2;
  }
  std::vector<nlohmann::json> identity;
  std::map<uint64_t, FrameCounts> stacks;
  std::vector<nlohmann::json> events;
  try {
    memtrace::read_trace(argv[1], [&](const memtrace::proto::Record& record) {
      if (record.has_stack()) {
        FrameCounts& counts = stacks[record.stack().id()];
        for (uint64_t f : record.stack().frames()) (f & kPythonFrameBit ? counts.python : counts.native)++;
        counts.native_cut = record.stack().native_frames_cut();
        counts.python_cut = record.stack().python_frames_cut();
      }
      if (record.has_event()) events.push_back(event_json(record.event()));
      if (record.has_start()) identity.push_back(start_json(record.start()));
      if (record.has_device()) identity.push_back(device_json(record.device()));
    });
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dump_events: %s: %s\n", argv[1], error.what());
    return 1;
  }
  if (start) {
    for (const nlohmann::json& r : identity) std::printf("%s\n", r.dump().c_str());
    return 0;
  }
  // Stacks are written before the events that use them, but a reader resolves them once the file is read.
  for (nlohmann::json& e : events) {
    auto stack = stacks.find(e["stack_id"].get<uint64_t>());
    e["has_stack"] = stack != stacks.end();
    if (frames && stack != stacks.end()) {
      e["native_frames"] = stack->second.native;
      e["python_frames"] = stack->second.python;
      e["native_frames_cut"] = stack->second.native_cut;
      e["python_frames_cut"] = stack->second.python_cut;
    }
    std::printf("%s\n", e.dump().c_str());
  }
  return 0;
}
