#include "export/event_csv.h"

#include <cinttypes>
#include <cstdio>

#include "model/replay.h"

namespace memtrace {
namespace {

// Writes each event's row once the model has applied it (the model keeps the trace's clock).
class CsvRows {
 public:
  CsvRows(const MemoryModel& model, std::ostream& out) : model_(model), out_(out) {}
  ReplayStep after_event(const EventFields& e) {
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, "%" PRIu64 ",%" PRId64 ",", index_++, model_.now_ns());
    out_ << numbers << proto::EventKind_Name(e.kind()) << ',' << proto::Layer_Name(e.layer()) << ','
         << proto::Api_Name(e.api()) << ',' << proto::Memory_Name(e.memory()) << ',';
    std::snprintf(numbers, sizeof numbers,
                  "%" PRId32 ",%" PRIu64 ",%" PRIu32 ",0x%" PRIx64 ",%" PRIu64 ",%" PRId32 ",%" PRIu64 ",%" PRIu64 "\n",
                  e.device(), e.stream(), e.tid(), e.address(), e.size(), e.result(), e.stack_id(), e.handle());
    out_ << numbers;
    return ReplayStep::kGoOn;
  }

 private:
  const MemoryModel& model_;
  std::ostream& out_;
  uint64_t index_ = 0;
};

}  // namespace

void write_event_csv(const ExportSource& source, std::ostream& out) {
  out << "event,time_ns,kind,layer,api,memory,device,stream,tid,address,size_bytes,result,stack_id,handle\n";
  MemoryModel model;
  CsvRows rows(model, out);
  replay_trace(source.path(), {}, model, rows);
}

}  // namespace memtrace
