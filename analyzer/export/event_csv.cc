#include "export/event_csv.h"

#include <cinttypes>
#include <cstdio>

#include "model/replay.h"

namespace memtrace {
namespace {

// Writes each event's row once the model has applied it (the model keeps the trace's clock), and a row for each
// allocation live at attach.
class CsvRows {
 public:
  CsvRows(const MemoryModel& model, std::ostream& out) : model_(model), out_(out) {}
  ReplayStep after_event(const EventFields& e) {
    char index[32];
    std::snprintf(index, sizeof index, "%" PRIu64, index_++);
    write_row(index, proto::EventKind_Name(e.kind()), e);
    return ReplayStep::kGoOn;
  }
  // A LiveAtAttach record: no event, so no index; its kind says what it is (LIVE_AT_ATTACH, or LIVE_AT_ATTACH_TOTAL
  // for a total of blocks not listed one by one, at address 0).
  void on_record(const proto::Record& record) {
    if (!record.has_live_at_attach()) return;
    const proto::LiveAtAttach& live = record.live_at_attach();
    write_row("", live.blocks_unknown() ? "LIVE_AT_ATTACH_TOTAL" : "LIVE_AT_ATTACH", alloc_event_of(live));
  }

 private:
  void write_row(const char* index, const std::string& kind, const EventFields& e) {
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, "%s,%" PRId64 ",", index, model_.now_ns());
    out_ << numbers << kind << ',' << proto::Layer_Name(e.layer()) << ',' << proto::Api_Name(e.api()) << ','
         << proto::Memory_Name(e.memory()) << ',';
    std::snprintf(numbers, sizeof numbers,
                  "%" PRId32 ",%" PRIu64 ",%" PRIu32 ",0x%" PRIx64 ",%" PRIu64 ",%" PRId32 ",%" PRIu64 ",%" PRIu64 "\n",
                  e.device(), e.stream(), e.tid(), e.address(), e.size(), e.result(), e.stack_id(), e.handle());
    out_ << numbers;
  }

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
