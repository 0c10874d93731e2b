#include "read/nvtx_ranges.h"

#include "read/trace_reader.h"

namespace memtrace {
namespace {

// `text` cut to at most `max` bytes, not inside a UTF-8 sequence.
void cut_utf8(std::string* text, size_t max) {
  if (text->size() <= max) return;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>((*text)[n]) & 0xC0) == 0x80) n--;
  text->resize(n);
}

int64_t ns_of(uint64_t time_us) {
  // A hostile time past what int64 ns hold is clamped, never overflowed.
  constexpr uint64_t kMaxUs = uint64_t(INT64_MAX) / 1000;
  return int64_t(time_us > kMaxUs ? kMaxUs : time_us) * 1000;
}

}  // namespace

void NvtxRangeCollector::on_record(const proto::Record& record, uint64_t events_before) {
  if (record.kind_case() == proto::Record::kRangeName) {
    const proto::RangeName& n = record.range_name();
    if (names_.size() < kMaxNames && !names_.contains(n.id())) {
      std::string name = n.name();
      cut_utf8(&name, kMaxNameBytes);
      names_.emplace(n.id(), std::move(name));
    }
    return;
  }
  if (record.kind_case() != proto::Record::kRangeEvent) return;
  const proto::RangeEvent& e = record.range_event();
  switch (e.kind()) {
    case proto::RangeEvent::PUSH: push(e, events_before); break;
    case proto::RangeEvent::POP: pop(e, events_before); break;
    case proto::RangeEvent::START: start(e, events_before); break;
    case proto::RangeEvent::END: end(e, events_before); break;
    default: break;  // MARK, and kinds newer than this reader
  }
}

void NvtxRangeCollector::open_range(const proto::RangeEvent& e, uint64_t events_before, uint32_t depth,
                                    size_t* index) {
  if (ranges_.size() >= kMaxRanges) {
    ++ranges_not_kept_;
    *index = kNotKept;
    return;
  }
  NvtxRange& r = ranges_.emplace_back();
  r.tid = e.tid();
  r.depth = depth;
  r.begin_ns = ns_of(e.time_us());
  r.first_event = events_before;
  name_ids_.push_back(e.name_id());
  *index = ranges_.size() - 1;
}

void NvtxRangeCollector::close_range(size_t index, const proto::RangeEvent& e, uint64_t events_before) {
  if (index == kNotKept) return;
  ranges_[index].end_ns = ns_of(e.time_us());
  ranges_[index].end_event = events_before;
}

void NvtxRangeCollector::push(const proto::RangeEvent& e, uint64_t events_before) {
  auto it = threads_.find(e.tid());
  if (it == threads_.end()) {
    if (threads_.size() >= kMaxThreads) {
      ++ranges_not_kept_;
      return;
    }
    it = threads_.emplace(e.tid(), ThreadStack()).first;
  }
  ThreadStack& stack = it->second;
  if (stack.open.size() >= kMaxDepth) {
    ++stack.deeper;
    ++ranges_not_kept_;
    return;
  }
  size_t index;
  open_range(e, events_before, uint32_t(stack.open.size()), &index);
  stack.open.push_back(index);
}

void NvtxRangeCollector::pop(const proto::RangeEvent& e, uint64_t events_before) {
  auto it = threads_.find(e.tid());
  if (it == threads_.end() || (it->second.open.empty() && it->second.deeper == 0)) {
    ++unmatched_;
    return;
  }
  ThreadStack& stack = it->second;
  if (stack.deeper > 0) {
    --stack.deeper;
    return;
  }
  close_range(stack.open.back(), e, events_before);
  stack.open.pop_back();
}

void NvtxRangeCollector::start(const proto::RangeEvent& e, uint64_t events_before) {
  size_t index;
  open_range(e, events_before, 0, &index);
  if (index == kNotKept) return;
  auto it = open_starts_.find(e.range_id());
  if (it != open_starts_.end()) {
    it->second = index;  // the earlier range of this id is never ended
  } else if (open_starts_.size() < kMaxOpenStarts) {
    open_starts_.emplace(e.range_id(), index);
  }
}

void NvtxRangeCollector::end(const proto::RangeEvent& e, uint64_t events_before) {
  auto it = open_starts_.find(e.range_id());
  if (it == open_starts_.end()) {
    ++unmatched_;
    return;
  }
  close_range(it->second, e, events_before);
  open_starts_.erase(it);
}

std::vector<NvtxRange> NvtxRangeCollector::finish(uint64_t events) {
  for (size_t i = 0; i < ranges_.size(); i++) {
    NvtxRange& r = ranges_[i];
    if (r.end_ns < 0) r.end_event = events;
    auto name = names_.find(name_ids_[i]);
    if (name != names_.end()) r.name = name->second;
  }
  name_ids_.clear();
  return std::move(ranges_);
}

std::vector<NvtxRange> collect_nvtx_ranges(const std::string& path) {
  NvtxRangeCollector collector;
  uint64_t events = 0;
  read_trace(path, SinkOf{[&](const EventFields&) { ++events; },
                          [&](const proto::Record& record) { collector.on_record(record, events); }});
  return collector.finish(events);
}

}  // namespace memtrace
