#include "fleet/process_summary.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>

#include "analysis/analysis.h"
#include "stacks/call_sites.h"
#include "stacks/folded_stack.h"
#include "stacks/frame_roles.h"
#include "stacks/frames.h"
#include "util/checked_math.h"
#include "util/format.h"

namespace memtrace {
namespace {

// CLOCK_REALTIME of a trace time: the start record's start_unix_ns plus `time_ns` (0 without a start record; a
// time before the epoch, only in a hostile trace, as 0).
uint64_t unix_ns_of(const Analysis& a, int64_t time_ns) {
  if (!a.info.start || a.info.start->start_unix_ns() == 0) return 0;
  const uint64_t start = a.info.start->start_unix_ns();
  if (time_ns < 0) {
    const uint64_t before = uint64_t(-(time_ns + 1)) + 1;  // |time_ns|, INT64_MIN's included
    return before >= start ? 0 : start - before;
  }
  // Past INT64_MAX only in a hostile trace: held there, so that no reader takes the figure for a wrapped negative.
  const uint64_t unix_ns = start + uint64_t(time_ns) < start ? UINT64_MAX : start + uint64_t(time_ns);
  return std::min<uint64_t>(unix_ns, INT64_MAX);
}

std::string basename_of(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// A portable site key as text: its frames innermost first, joined by " | ": "py:FILE:LINE FUNCTION",
// "native:BUILD-ID-HEX+0xOFFSET" (or the module's path where it has no build id), "addr:0x..." for an address in
// no module, "pyid:N" for a Python frame id the trace never defined; then its cut and backward marks.
std::string site_key_text(const PortableSiteKey& key) {
  std::string text;
  char number[40];
  for (const PortableFrame& f : key.frames) {
    if (!text.empty()) text += " | ";
    switch (f.kind) {
      case PortableFrame::Kind::kPython:
        text += "py:" + f.source->file + ":" + std::to_string(f.source->line) + " " + f.source->function;
        break;
      case PortableFrame::Kind::kNative: {
        text += "native:";
        if (f.module->by_build_id) {
          for (unsigned char c : f.module->id) {
            std::snprintf(number, sizeof number, "%02x", c);
            text += number;
          }
        } else {
          text += f.module->id;
        }
        std::snprintf(number, sizeof number, "+0x%" PRIx64, f.value);
        text += number;
        break;
      }
      case PortableFrame::Kind::kNativeOutsideModules:
        std::snprintf(number, sizeof number, "addr:0x%" PRIx64, f.value);
        text += number;
        break;
      case PortableFrame::Kind::kPythonNotInTrace: text += "pyid:" + std::to_string(f.value); break;
    }
  }
  if (key.cuts.native_frames_cut) text += " | [native frames cut]";
  if (key.cuts.python_frames_cut) text += " | [python frames cut]";
  if (key.python_frames_from_backward) text += " | [backward]";
  return text;
}

// The line of a stack without Python frames that the program itself allocated from: its innermost native frame as
// "file.cc:12 function()", where that frame is symbolized with a source line and is no library's of the known
// layers (PyTorch's allocator, cuBLAS, cuDNN, NCCL, the CUDA API) nor an ATen operator or autograd node; else
// what its native frames did (native_summary).
std::string native_site_text(const ResolvedStack& stack) {
  const NativeRoles roles = native_roles(stack);
  const Frame* innermost = stack.frames.empty() ? nullptr : &stack.frames.front();
  const bool own_line = innermost && !innermost->python && innermost->line != 0 && !innermost->file.empty() &&
                        roles.layer == AllocatingLayer::kOther && !roles.aten_operator && !roles.autograd_node;
  if (!own_line) return native_summary(stack);
  return basename_of(innermost->file) + ":" + std::to_string(innermost->line) + " " +
         shorten_cpp_name(innermost->function);
}

// A call site as a reader names it: the innermost Python frame of the user's own code ("train.py:42 main"), else
// the innermost Python frame (its display path), else the program's own native line or what its native frames did
// (native_site_text; the only case that symbolizes). "" for stack 0.
std::string site_text(const Analysis& a, FrameResolver& resolver, uint64_t stack_id) {
  if (stack_id == 0) return "";
  std::optional<PortableSiteKey> key = site_key(a.stacks, stack_id);
  const PythonSource* innermost_python = nullptr;
  if (key) {
    for (const PortableFrame& f : key->frames) {
      if (f.kind != PortableFrame::Kind::kPython) continue;
      if (python_source_kind(f.source->file) == SourceKind::kUser)
        return basename_of(f.source->file) + ":" + std::to_string(f.source->line) + " " + f.source->function;
      if (!innermost_python) innermost_python = f.source;
    }
  }
  if (innermost_python)
    return std::string(python_display_path(innermost_python->file)) + ":" + std::to_string(innermost_python->line) +
           " " + innermost_python->function;
  return native_site_text(resolver.resolve(stack_id));
}

// At most kMaxDeviceSamples samples, evenly spread, the one with the largest other_processes_used_bytes kept.
std::vector<DeviceSample> thinned(std::vector<DeviceSample> samples) {
  if (samples.size() <= kMaxDeviceSamples) return samples;
  auto largest = std::max_element(samples.begin(), samples.end(), [](const DeviceSample& x, const DeviceSample& y) {
    return x.other_processes_used_bytes < y.other_processes_used_bytes;
  });
  const DeviceSample keep = *largest;
  std::vector<DeviceSample> out;
  for (size_t k = 0; k < kMaxDeviceSamples; ++k) out.push_back(samples[k * samples.size() / kMaxDeviceSamples]);
  if (std::find(out.begin(), out.end(), keep) == out.end()) {
    // Replaces the kept sample's nearest neighbour in time, so the series stays in time order.
    auto at = std::lower_bound(out.begin(), out.end(), keep.unix_ns,
                               [](const DeviceSample& s, uint64_t t) { return s.unix_ns < t; });
    *(at == out.end() ? out.end() - 1 : at) = keep;
  }
  return out;
}

ProcessDevice summarize_device(const Analysis& a, FrameResolver& resolver, int32_t ordinal, const DeviceState& d) {
  ProcessDevice out;
  out.ordinal = ordinal;
  if (ordinal >= 0) {
    if (const proto::Device* record = a.info.device(uint32_t(ordinal))) {
      out.gpu = gpu_uuid_name(record->uuid());
      out.name = record->name();
      out.total_bytes = record->total_bytes();
    }
  }
  const Peak allocated = d.peak_allocated(), reserved = d.peak_reserved();
  out.peak_allocated = {allocated.bytes, unix_ns_of(a, allocated.time_ns)};
  out.peak_reserved = {reserved.bytes, unix_ns_of(a, reserved.time_ns)};
  const DeviceTotals final_totals = d.totals();
  out.final_allocated_bytes = final_totals.allocated_bytes;
  out.final_reserved_bytes = final_totals.reserved_bytes;
  out.allocations = d.block_layer_seen ? d.block_allocations : d.driver_allocations;
  for (const OomEvent& oom : a.model.ooms())
    if (oom.device == ordinal) ++out.ooms;
  if (ordinal >= 0) {  // the pids NVML listed beside the process (TraceInfo keeps at most kMaxDeviceSamples)
    if (auto pids = a.info.nvml_other_pids.find(uint32_t(ordinal)); pids != a.info.nvml_other_pids.end())
      out.nvml_other_pids.assign(pids->second.begin(), pids->second.end());
  }
  auto facts = a.device_facts.find(ordinal);
  if (facts == a.device_facts.end()) return out;
  if (facts->second.allocated) {
    out.first_allocation_unix_ns = unix_ns_of(a, facts->second.first_allocation_ns);
    out.first_allocation_site = site_text(a, resolver, facts->second.first_allocation_stack_id);
  }
  std::vector<DeviceSample> samples;
  for (const UsageSample& s : facts->second.samples)
    samples.push_back({unix_ns_of(a, s.time_ns), s.used_bytes, s.process_used_bytes, s.other_processes_used_bytes});
  out.samples = thinned(std::move(samples));
  return out;
}

std::optional<ProcessAttach> summarize_attach(const Analysis& a) {
  if (!began_at_attach(a)) return std::nullopt;
  const proto::TraceStart& s = *a.info.start;
  const AttachFacts all = sum_attach_facts(a.model.attach_facts());
  return ProcessAttach{
      origin_name(s.origin()),     s.attach_number(),     std::min<uint64_t>(s.start_unix_ns(), INT64_MAX),
      all.allocated_allocations(), all.allocated_bytes(), all.unlisted_bytes};
}

}  // namespace

ProcessSummary summarize_process(const Analysis& a, FrameResolver& resolver, size_t top_leaks) {
  ProcessSummary p;
  p.trace = a.path;
  if (a.info.start) {
    const proto::TraceStart& s = *a.info.start;
    p.pid = s.pid();
    p.ppid = s.ppid();
    p.host = s.hostname();
    if (s.has_rank()) p.rank = s.rank();
    if (s.has_local_rank()) p.local_rank = s.local_rank();
    if (s.has_world_size()) p.world_size = s.world_size();
    p.job_id = s.job_id();
    p.argv.assign(s.argv().begin(), s.argv().end());
    p.start_unix_ns = std::min<uint64_t>(s.start_unix_ns(), INT64_MAX);  // as unix_ns_of holds every time
  }
  p.end_unix_ns = unix_ns_of(a, a.duration_ns());
  p.truncated = a.read.truncated;
  p.attach = summarize_attach(a);
  for (const auto& [ordinal, state] : a.model.devices())
    p.devices.push_back(summarize_device(a, resolver, ordinal, state));
  for (const LeakSite& l : a.leaks) {
    p.leaked_bytes = saturating_add(p.leaked_bytes, l.site.bytes);
    ++p.leak_sites;
  }
  for (const LeakSite& l : a.leaks) {
    if (p.leaks.size() >= top_leaks) break;
    std::optional<PortableSiteKey> key = site_key(a.stacks, l.site.stack_id);
    p.leaks.push_back(ProcessLeak{l.site.device, key ? site_key_text(*key) : "stack:" + std::to_string(l.site.stack_id),
                                  site_text(a, resolver, l.site.stack_id), l.site.bytes, l.site.count});
  }
  return p;
}

// ---- JSON ----------------------------------------------------------------------------------------------------

namespace {

nlohmann::json optional_number(const std::optional<uint32_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json timed_json(const TimedBytes& t) { return {{"bytes", t.bytes}, {"unix_ns", t.unix_ns}}; }

nlohmann::json attach_json(const std::optional<ProcessAttach>& attach) {
  if (!attach) return nullptr;
  return {{"origin", attach->origin},   {"attach_number", attach->attach_number},
          {"unix_ns", attach->unix_ns}, {"allocations", attach->allocations},
          {"bytes", attach->bytes},     {"unlisted_bytes", attach->unlisted_bytes}};
}

nlohmann::json device_json(const ProcessDevice& d) {
  nlohmann::json samples = nlohmann::json::array();
  for (const DeviceSample& s : d.samples)
    samples.push_back({s.unix_ns, s.used_bytes, s.process_used_bytes, s.other_processes_used_bytes});
  return {{"ordinal", d.ordinal},
          {"gpu", d.gpu},
          {"name", d.name},
          {"total_bytes", d.total_bytes},
          {"peak_allocated", timed_json(d.peak_allocated)},
          {"peak_reserved", timed_json(d.peak_reserved)},
          {"final_allocated_bytes", d.final_allocated_bytes},
          {"final_reserved_bytes", d.final_reserved_bytes},
          {"allocations", d.allocations},
          {"first_allocation_unix_ns", d.first_allocation_unix_ns},
          {"first_allocation_site", d.first_allocation_site},
          {"ooms", d.ooms},
          {"samples", samples},
          {"nvml_other_pids", d.nvml_other_pids}};
}

}  // namespace

nlohmann::json process_summary_json(const ProcessSummary& p) {
  nlohmann::json devices = nlohmann::json::array(), leaks = nlohmann::json::array();
  for (const ProcessDevice& d : p.devices) devices.push_back(device_json(d));
  for (const ProcessLeak& l : p.leaks)
    leaks.push_back(
        {{"device", l.device}, {"site_key", l.site_key}, {"site", l.site}, {"bytes", l.bytes}, {"count", l.count}});
  return {{"trace", p.trace},
          {"pid", p.pid},
          {"ppid", p.ppid},
          {"host", p.host},
          {"rank", optional_number(p.rank)},
          {"local_rank", optional_number(p.local_rank)},
          {"world_size", optional_number(p.world_size)},
          {"job_id", p.job_id},
          {"argv", p.argv},
          {"start_unix_ns", p.start_unix_ns},
          {"end_unix_ns", p.end_unix_ns},
          {"truncated", p.truncated},
          {"attach", attach_json(p.attach)},
          {"devices", devices},
          {"leaked_bytes", p.leaked_bytes},
          {"leak_sites", p.leak_sites},
          {"leaks", leaks}};
}

namespace {

// Reading back: every key required, of its type; errors say which key of which part.
const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& where) {
  if (!object.is_object()) throw std::runtime_error(where + " is not an object");
  auto it = object.find(key);
  if (it == object.end()) throw std::runtime_error(where + " has no \"" + key + "\"");
  return *it;
}

uint64_t u64(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& v = member(object, key, where);
  if (!v.is_number_unsigned()) throw std::runtime_error(where + "'s \"" + key + "\" is not a whole number >= 0");
  return v.get<uint64_t>();
}

uint32_t u32(const nlohmann::json& object, const char* key, const std::string& where) {
  const uint64_t v = u64(object, key, where);
  if (v > UINT32_MAX) throw std::runtime_error(where + "'s \"" + key + "\" is larger than 2^32 - 1");
  return uint32_t(v);
}

int32_t i32(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& v = member(object, key, where);
  if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
    throw std::runtime_error(where + "'s \"" + key + "\" is not a 32-bit whole number");
  return v.get<int32_t>();
}

std::string text(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& v = member(object, key, where);
  if (!v.is_string()) throw std::runtime_error(where + "'s \"" + key + "\" is not a string");
  return v.get<std::string>();
}

std::optional<uint32_t> optional_u32(const nlohmann::json& object, const char* key, const std::string& where) {
  if (member(object, key, where).is_null()) return std::nullopt;
  return u32(object, key, where);
}

const nlohmann::json& array(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& v = member(object, key, where);
  if (!v.is_array()) throw std::runtime_error(where + "'s \"" + key + "\" is not a list");
  return v;
}

TimedBytes timed(const nlohmann::json& object, const char* key, const std::string& where) {
  const std::string inner = where + "'s \"" + key + "\"";
  const nlohmann::json& v = member(object, key, where);
  return {u64(v, "bytes", inner), u64(v, "unix_ns", inner)};
}

DeviceSample sample_from_json(const nlohmann::json& s, const std::string& where) {
  if (!s.is_array() || s.size() != 4 ||
      !std::all_of(s.begin(), s.end(), [](const nlohmann::json& v) { return v.is_number_unsigned(); }))
    throw std::runtime_error(where + " is not [unix_ns, used_bytes, process_used_bytes, other_processes_used_bytes]");
  return {s[0].get<uint64_t>(), s[1].get<uint64_t>(), s[2].get<uint64_t>(), s[3].get<uint64_t>()};
}

// "attach": null, or absent in a summary written before it was kept, for a trace that began at launch.
std::optional<ProcessAttach> attach_from_json(const nlohmann::json& process, const std::string& where) {
  auto it = process.find("attach");
  if (it == process.end() || it->is_null()) return std::nullopt;
  const std::string at = where + "'s \"attach\"";
  return ProcessAttach{text(*it, "origin", at),     u32(*it, "attach_number", at), u64(*it, "unix_ns", at),
                       u64(*it, "allocations", at), u64(*it, "bytes", at),         u64(*it, "unlisted_bytes", at)};
}

ProcessDevice device_from_json(const nlohmann::json& j, const std::string& where) {
  ProcessDevice d;
  d.ordinal = i32(j, "ordinal", where);
  d.gpu = text(j, "gpu", where);
  d.name = text(j, "name", where);
  d.total_bytes = u64(j, "total_bytes", where);
  d.peak_allocated = timed(j, "peak_allocated", where);
  d.peak_reserved = timed(j, "peak_reserved", where);
  d.final_allocated_bytes = u64(j, "final_allocated_bytes", where);
  d.final_reserved_bytes = u64(j, "final_reserved_bytes", where);
  d.allocations = u64(j, "allocations", where);
  d.first_allocation_unix_ns = u64(j, "first_allocation_unix_ns", where);
  d.first_allocation_site = text(j, "first_allocation_site", where);
  d.ooms = u64(j, "ooms", where);
  const nlohmann::json& samples = array(j, "samples", where);
  if (samples.size() > kMaxDeviceSamples) throw std::runtime_error(where + " has more samples than a summary keeps");
  for (size_t i = 0; i < samples.size(); ++i)
    d.samples.push_back(sample_from_json(samples[i], where + "'s sample " + std::to_string(i)));
  const nlohmann::json& pids = array(j, "nvml_other_pids", where);
  if (pids.size() > kMaxDeviceSamples) throw std::runtime_error(where + " has more pids than a summary keeps");
  for (const nlohmann::json& pid : pids) {
    if (!pid.is_number_unsigned() || pid.get<uint64_t>() > UINT32_MAX)
      throw std::runtime_error(where + "'s \"nvml_other_pids\" holds something that is not a pid");
    d.nvml_other_pids.push_back(pid.get<uint32_t>());
  }
  return d;
}

}  // namespace

ProcessSummary process_summary_from_json(const nlohmann::json& j) {
  const std::string where = "the process";
  ProcessSummary p;
  p.trace = text(j, "trace", where);
  const std::string named = "the process of " + p.trace;
  p.pid = u32(j, "pid", named);
  p.ppid = u32(j, "ppid", named);
  p.host = text(j, "host", named);
  p.rank = optional_u32(j, "rank", named);
  p.local_rank = optional_u32(j, "local_rank", named);
  p.world_size = optional_u32(j, "world_size", named);
  p.job_id = text(j, "job_id", named);
  for (const nlohmann::json& arg : array(j, "argv", named)) {
    if (!arg.is_string()) throw std::runtime_error(named + "'s \"argv\" holds something that is not a string");
    p.argv.push_back(arg.get<std::string>());
  }
  p.start_unix_ns = u64(j, "start_unix_ns", named);
  p.end_unix_ns = u64(j, "end_unix_ns", named);
  const nlohmann::json& truncated = member(j, "truncated", named);
  if (!truncated.is_boolean()) throw std::runtime_error(named + "'s \"truncated\" is not true or false");
  p.truncated = truncated.get<bool>();
  p.attach = attach_from_json(j, named);
  const nlohmann::json& devices = array(j, "devices", named);
  for (size_t i = 0; i < devices.size(); ++i)
    p.devices.push_back(device_from_json(devices[i], named + "'s device " + std::to_string(i)));
  p.leaked_bytes = u64(j, "leaked_bytes", named);
  p.leak_sites = u64(j, "leak_sites", named);
  const nlohmann::json& leaks = array(j, "leaks", named);
  for (size_t i = 0; i < leaks.size(); ++i) {
    const std::string at = named + "'s leak " + std::to_string(i);
    p.leaks.push_back(ProcessLeak{i32(leaks[i], "device", at), text(leaks[i], "site_key", at),
                                  text(leaks[i], "site", at), u64(leaks[i], "bytes", at), u64(leaks[i], "count", at)});
  }
  return p;
}

}  // namespace memtrace
