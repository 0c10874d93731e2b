#include "export/record_dump.h"

#include <nlohmann/json.hpp>

#include <unordered_map>

#include "stacks/stack_table.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

// What an event's line says of its stack.
struct StackFrames {
  int native = 0;
  int python = 0;
  bool native_cut = false;
  bool python_cut = false;
  bool from_backward = false;
};
using StackFramesById = std::unordered_map<uint64_t, StackFrames>;

std::string hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

nlohmann::json start_json(const proto::TraceStart& s) {
  nlohmann::json j = {{"pid", s.pid()},
                      {"ppid", s.ppid()},
                      {"hostname", s.hostname()},
                      {"argv", nlohmann::json::array()},
                      {"start_monotonic_ns", s.start_monotonic_ns()},
                      {"start_unix_ns", s.start_unix_ns()},
                      {"tracer_version", s.tracer_version()},
                      {"flush_interval_ms", s.flush_interval_ms()},
                      {"python_frames", s.python_frames()}};
  for (const std::string& arg : s.argv()) j["argv"].push_back(arg);
  if (s.has_max_native_frames()) j["max_native_frames"] = s.max_native_frames();
  if (s.has_max_native_frames_python()) j["max_native_frames_python"] = s.max_native_frames_python();
  if (s.has_rank()) j["rank"] = s.rank();
  if (s.has_local_rank()) j["local_rank"] = s.local_rank();
  if (s.has_world_size()) j["world_size"] = s.world_size();
  j["job_id"] = s.job_id();
  j["job_id_source"] = proto::TraceStart::JobIdSource_Name(s.job_id_source());
  // How the trace began, only for one that began by attach (a trace from launch reads as before these fields).
  if (s.origin() != proto::TraceStart::LAUNCH || s.attach_number() || s.driver_layer_attached() ||
      s.torch_layer_attached()) {
    j["origin"] = proto::TraceStart::Origin_Name(s.origin());
    j["attach_number"] = s.attach_number();
    j["driver_layer_attached"] = s.driver_layer_attached();
    j["torch_layer_attached"] = s.torch_layer_attached();
  }
  return j;
}

nlohmann::json live_at_attach_json(const proto::LiveAtAttach& l) {
  return {{"layer", proto::Layer_Name(l.layer())},
          {"api", proto::Api_Name(l.api())},
          {"device", l.device()},
          {"address", l.address()},
          {"size", l.size()},
          {"memory", proto::Memory_Name(l.memory())},
          {"stream", l.stream()},
          {"blocks_unknown", l.blocks_unknown()},
          {"expandable_segment", l.expandable_segment()},
          {"torch_segment", l.torch_segment()}};
}

// The PyTorch totals and NVML's figure only where the record has them (absent: PyTorch not loaded, no NVML).
nlohmann::json attach_baseline_json(const proto::AttachBaseline& b) {
  nlohmann::json j = {{"device", b.device()},
                      {"device_free_bytes", b.device_free_bytes()},
                      {"device_total_bytes", b.device_total_bytes()}};
  if (b.has_allocator_allocated_bytes()) j["allocator_allocated_bytes"] = b.allocator_allocated_bytes();
  if (b.has_allocator_reserved_bytes()) j["allocator_reserved_bytes"] = b.allocator_reserved_bytes();
  if (b.has_process_used_bytes()) j["process_used_bytes"] = b.process_used_bytes();
  return j;
}

nlohmann::json module_json(const proto::Module& m) {
  return {{"path", m.path()},
          {"load_address", m.load_address()},
          {"start", m.start()},
          {"end", m.end()},
          {"build_id", hex(m.build_id())}};
}

nlohmann::json python_frame_json(const proto::PythonFrame& f) {
  return {{"id", f.id()}, {"file", f.file()}, {"function", f.function()}, {"line", f.line()}};
}

nlohmann::json stack_json(const proto::Stack& s) {
  nlohmann::json frames = nlohmann::json::array();
  for (uint64_t frame : s.frames()) frames.push_back(frame);
  nlohmann::json j = {{"id", s.id()},
                      {"frames", std::move(frames)},
                      {"native_frames_cut", s.native_frames_cut()},
                      {"python_frames_cut", s.python_frames_cut()}};
  if (s.python_frames_from_backward()) j["python_frames_from_backward"] = true;  // only when true, as in reports
  return j;
}

// The fields tests/e2e compare (they read these lines through e2e_lib.py's dump_events).
nlohmann::json event_json(const proto::Event& e) {
  nlohmann::json j = {
      {"kind", proto::EventKind_Name(e.kind())},
      {"layer", proto::Layer_Name(e.layer())},
      {"api", proto::Api_Name(e.api())},
      {"memory", proto::Memory_Name(e.memory())},
      {"tid", e.tid()},
      {"device", e.device()},
      {"stream", e.stream()},
      {"address", e.address()},
      {"size", e.size()},
      {"result", e.result()},
      {"stack_id", e.stack_id()},
      {"handle", e.handle()},
      {"graph", e.graph()},
      {"capture_id", e.capture_id()},
      {"device_free_bytes", e.device_free_bytes()},
      {"device_total_bytes", e.device_total_bytes()},
      {"context", e.context()},
  };
  if (e.has_process_used_bytes()) j["process_used_bytes"] = e.process_used_bytes();
  if (e.has_other_processes_used_bytes()) j["other_processes_used_bytes"] = e.other_processes_used_bytes();
  return j;
}

void add_stack_frames(const proto::Event& e, const StackFramesById& stacks, const DumpOptions& options,
                      nlohmann::json* j) {
  auto stack = stacks.find(e.stack_id());
  (*j)["has_stack"] = stack != stacks.end();
  if (!options.frames || stack == stacks.end()) return;
  (*j)["native_frames"] = stack->second.native;
  (*j)["python_frames"] = stack->second.python;
  (*j)["native_frames_cut"] = stack->second.native_cut;
  (*j)["python_frames_cut"] = stack->second.python_cut;
  if (stack->second.from_backward) (*j)["python_frames_from_backward"] = true;
}

nlohmann::json thread_json(const proto::ThreadInfo& t) { return {{"tid", t.tid()}, {"name", t.name()}}; }

nlohmann::json notice_json(const proto::Notice& n) {
  return {{"code", proto::Notice_Code_Name(n.code())}, {"message", n.message()}, {"count", n.count()}};
}

nlohmann::json device_json(const proto::Device& d) {
  return {{"ordinal", d.ordinal()}, {"uuid", hex(d.uuid())}, {"name", d.name()}, {"total_bytes", d.total_bytes()}};
}

// `used_bytes` only where NVML gave a figure (absent and 0 differ: 0 is a process without memory yet).
nlohmann::json nvml_processes_json(const proto::NvmlProcesses& list) {
  nlohmann::json processes = nlohmann::json::array();
  for (const proto::NvmlProcess& p : list.processes()) {
    nlohmann::json entry = {{"pid", p.pid()}};
    if (p.has_used_bytes()) entry["used_bytes"] = p.used_bytes();
    processes.push_back(std::move(entry));
  }
  return {{"device", list.device()}, {"processes", std::move(processes)}};
}

nlohmann::json range_name_json(const proto::RangeName& n) { return {{"id", n.id()}, {"name", n.name()}}; }

nlohmann::json range_event_json(const proto::RangeEvent& e) {
  return {{"kind", proto::RangeEvent_Kind_Name(e.kind())},
          {"name_id", e.name_id()},
          {"tid", e.tid()},
          {"time_us", e.time_us()},
          {"range_id", e.range_id()}};
}

nlohmann::json end_json(const proto::TraceEnd& e) {
  return {{"events", e.events()},
          {"dropped_events", e.dropped_events()},
          {"time_delta_ns", e.time_delta_ns()},
          {"how", proto::TraceEnd_How_Name(e.how())},
          {"signal", e.signal()}};
}

// The line of one record, "record" included.
nlohmann::json record_json(const proto::Record& record, const StackFramesById& stacks, const DumpOptions& options) {
  nlohmann::json j;
  const char* kind = "unknown";
  switch (record.kind_case()) {
    case proto::Record::kStart:
      j = start_json(record.start());
      kind = "start";
      break;
    case proto::Record::kModule:
      j = module_json(record.module());
      kind = "module";
      break;
    case proto::Record::kPythonFrame:
      j = python_frame_json(record.python_frame());
      kind = "python_frame";
      break;
    case proto::Record::kStack:
      j = stack_json(record.stack());
      kind = "stack";
      break;
    case proto::Record::kEvent:
      j = event_json(record.event());
      add_stack_frames(record.event(), stacks, options, &j);
      kind = "event";
      break;
    case proto::Record::kThread:
      j = thread_json(record.thread());
      kind = "thread";
      break;
    case proto::Record::kNotice:
      j = notice_json(record.notice());
      kind = "notice";
      break;
    case proto::Record::kEnd:
      j = end_json(record.end());
      kind = "end";
      break;
    case proto::Record::kDevice:
      j = device_json(record.device());
      kind = "device";
      break;
    case proto::Record::kRangeName:
      j = range_name_json(record.range_name());
      kind = "range_name";
      break;
    case proto::Record::kRangeEvent:
      j = range_event_json(record.range_event());
      kind = "range_event";
      break;
    case proto::Record::kNvmlProcesses:
      j = nvml_processes_json(record.nvml_processes());
      kind = "nvml_processes";
      break;
    case proto::Record::kLiveAtAttach:
      j = live_at_attach_json(record.live_at_attach());
      kind = "live_at_attach";
      break;
    case proto::Record::kAttachBaseline:
      j = attach_baseline_json(record.attach_baseline());
      kind = "attach_baseline";
      break;
    case proto::Record::KIND_NOT_SET:  // a record kind newer than this reader (proto3: skipped fields)
      j = nlohmann::json::object();
      break;
  }
  j["record"] = kind;
  return j;
}

// The first read: every Stack record's frame counts by id (a later record of the same id replaces an earlier).
StackFramesById read_stack_frames(const std::string& path) {
  StackFramesById stacks;
  auto on_record = [&](const proto::Record& record) {
    if (!record.has_stack()) return;
    StackFrames counts;
    for (uint64_t frame : record.stack().frames()) ++(frame & kPythonFrameBit ? counts.python : counts.native);
    counts.native_cut = record.stack().native_frames_cut();
    counts.python_cut = record.stack().python_frames_cut();
    counts.from_backward = record.stack().python_frames_from_backward();
    stacks[record.stack().id()] = counts;
  };
  read_trace(path, SinkOf{[](const EventFields&) {}, on_record});
  return stacks;
}

}  // namespace

TraceReadSummary dump_records(const std::string& path, const DumpOptions& options, std::ostream& out) {
  const StackFramesById stacks = read_stack_frames(path);
  return read_trace(path, [&](const proto::Record& record) {
    // Invalid UTF-8 cannot reach here (the reader repairs text fields); `replace` is the belt to those braces.
    out << json_terminal_safe(
               record_json(record, stacks, options).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
        << '\n';
  });
}

}  // namespace memtrace
