// `memtrace timeline TRACE --csv|--json [--interval S]`: one row per event that changes a device's
// totals (time from trace start, device, allocated, reserved, driver), streamed as the trace is read.
// With --interval, at most one row per device per interval, at the time of its last change, holding the
// highest value each total reached within the interval (a sampled timeline must not hide a peak).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "commands.h"

namespace memtrace {
namespace {

struct Row {
  int32_t device;
  int64_t time_ns;
  DeviceTotals totals;
};

class RowWriter {
 public:
  explicit RowWriter(bool json) : json_(json) {
    if (json_) std::cout << "{\"rows\": [";
    else std::cout << "time_s,device,allocated_bytes,reserved_bytes,driver_bytes\n";
  }
  void write(const Row& row) {
    if (json_) {
      nlohmann::json r = {{"time_s", seconds(row.time_ns)}, {"device", row.device},
                          {"allocated_bytes", row.totals.allocated_bytes},
                          {"reserved_bytes", row.totals.reserved_bytes}, {"driver_bytes", row.totals.driver_bytes}};
      std::cout << (rows_ ? ",\n  " : "\n  ") << r.dump();
    } else {
      char time[32];
      std::snprintf(time, sizeof time, "%.9f", seconds(row.time_ns));
      std::cout << time << ',' << row.device << ',' << row.totals.allocated_bytes << ','
                << row.totals.reserved_bytes << ',' << row.totals.driver_bytes << '\n';
    }
    ++rows_;
  }
  void finish(const TraceReadSummary& read, uint64_t events) {
    if (!json_) return;
    nlohmann::json trace = {{"events", events}, {"truncated", read.truncated}};
    std::cout << "\n], \"trace\": " << trace.dump() << "}\n";
  }

 private:
  bool json_;
  uint64_t rows_ = 0;
};

// Keeps, per device, the current interval's row (its maxima, at its last change) and writes it when a
// later interval starts.
class IntervalSampler {
 public:
  IntervalSampler(RowWriter& writer, std::optional<int64_t> interval_ns) : writer_(writer), interval_ns_(interval_ns) {}
  void add(const Row& row) {
    if (!interval_ns_) return writer_.write(row);
    auto it = pending_.find(row.device);
    if (it == pending_.end()) {
      pending_.emplace(row.device, row);
      return;
    }
    Row& pending = it->second;
    if (pending.time_ns / *interval_ns_ != row.time_ns / *interval_ns_) {
      writer_.write(pending);
      pending = row;
      return;
    }
    pending.time_ns = row.time_ns;
    pending.totals.allocated_bytes = std::max(pending.totals.allocated_bytes, row.totals.allocated_bytes);
    pending.totals.reserved_bytes = std::max(pending.totals.reserved_bytes, row.totals.reserved_bytes);
    pending.totals.driver_bytes = std::max(pending.totals.driver_bytes, row.totals.driver_bytes);
  }
  void flush() {
    for (const auto& [device, row] : pending_) writer_.write(row);
    pending_.clear();
  }

 private:
  RowWriter& writer_;
  std::optional<int64_t> interval_ns_;
  std::map<int32_t, Row> pending_;
};

std::optional<int64_t> parse_interval(const ParsedArgs& parsed) {
  const std::string* text = parsed.value("--interval");
  if (!text) return std::nullopt;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text->size() || !(value > 0) || !std::isfinite(value))
    throw UsageError("--interval needs a positive number of seconds, not '" + *text + "'");
  return std::max<int64_t>(1, int64_t(value * 1e9));
}

}  // namespace

int cmd_timeline(const std::vector<std::string>& args) {
  ParsedArgs parsed = parse_report_args(args, {"--csv", "--json"}, {"--interval"});
  if (parsed.has("--csv") == parsed.has("--json")) throw UsageError("timeline needs exactly one of --csv, --json");
  std::optional<int64_t> interval_ns = parse_interval(parsed);
  MemoryModel model;
  try {
    // First pass: which devices have a block / allocator layer, so that every row means the same
    // thing. A damaged file fails here, before any row is printed.
    MemoryModel layers;
    read_trace(parsed.trace, [&](const proto::Record& record) {
      if (record.kind_case() == proto::Record::kEvent) layers.apply(record.event());
    });
    model.set_layer_hints(layers.layer_hints());
  } catch (const TraceError& e) {
    return report_trace_error(parsed.trace, e);
  }
  RowWriter writer(parsed.has("--json"));
  IntervalSampler sampler(writer, interval_ns);
  model.set_totals_callback([&](int32_t device, int64_t time_ns, const DeviceTotals& totals) {
    sampler.add(Row{device, time_ns, totals});
  });
  TraceReadSummary read;
  try {
    read = read_trace(parsed.trace, [&](const proto::Record& record) {
      if (record.kind_case() == proto::Record::kEvent) model.apply(record.event());
    });
  } catch (const TraceError& e) {  // the file changed between the passes
    std::cout.flush();
    return report_trace_error(parsed.trace, e);
  }
  sampler.flush();
  writer.finish(read, model.health().events);
  if (read.truncated)
    std::cerr << "memtrace: " << parsed.trace << ": truncated trace, rows up to the last complete chunk\n";
  return kExitOk;
}

}  // namespace memtrace
