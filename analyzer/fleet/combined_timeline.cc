#include "fleet/combined_timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>

#include "model/memory_model.h"
#include "model/replay.h"

namespace memtrace {
namespace {

using u128 = unsigned __int128;

uint64_t saturate(u128 value) {
  return value > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max() : uint64_t(value);
}

// start_unix_ns + time_ns, held to [0, UINT64_MAX]: a time before the start (a clock that stepped back) or
// past 2554 (a damaged file) stays ordered.
uint64_t wall_clock_ns(uint64_t start_unix_ns, int64_t time_ns) {
  __int128 sum = __int128(start_unix_ns) + time_ns;
  if (sum < 0) return 0;
  return saturate(u128(sum));
}

// Zigzag: a signed delta as an unsigned varint, small either way. The deltas are taken modulo 2^64 and added
// back modulo 2^64, so any pair of values round-trips exactly.
uint64_t zigzag(uint64_t delta) { return (delta << 1) ^ uint64_t(int64_t(delta) >> 63); }
uint64_t unzigzag(uint64_t value) { return (value >> 1) ^ (0 - (value & 1)); }

// The unlinked temporary file all members spill into, in $TMPDIR (else /tmp): a change series can be large, and
// TMPDIR is where the user says large temporary files go.
int make_spill_file() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/memtrace-combined-XXXXXX";
  int fd = mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error("cannot create a temporary file in " + pattern + ": " + std::strerror(errno));
  unlink(pattern.c_str());
  return fd;
}

// Appends varints to the spill through a buffer of its own.
class SpillWriter {
 public:
  explicit SpillWriter(int fd) : fd_(fd) { buffer_.reserve(kBufferBytes); }
  void put(uint64_t value) {
    while (value >= 0x80) {
      buffer_.push_back(uint8_t(value | 0x80));
      value >>= 7;
    }
    buffer_.push_back(uint8_t(value));
    if (buffer_.size() + kMaxRecordBytes > kBufferBytes) flush();
  }
  void flush() {
    size_t done = 0;
    while (done < buffer_.size()) {
      ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw std::runtime_error(std::string("cannot write the timeline's temporary file: ") +
                                 std::strerror(n < 0 ? errno : ENOSPC));
      done += size_t(n);
    }
    offset_ += buffer_.size();
    buffer_.clear();
  }
  uint64_t offset() const { return offset_ + buffer_.size(); }
  static constexpr size_t kMaxRecordBytes = 30;  // three varints of at most 10 bytes

 private:
  static constexpr size_t kBufferBytes = 64 * 1024;
  int fd_;
  std::vector<uint8_t> buffer_;
  uint64_t offset_ = 0;
};

// The first pass's and the second's observer: every event goes on; the TraceStart's wall-clock time is kept, and
// with a `model`, each TraceEnd's time is given to it (MemoryModel::apply_end), so that its clock ends where the
// process did.
class StartObserver {
 public:
  explicit StartObserver(MemoryModel* model = nullptr) : model_(model) {}
  ReplayStep after_event(const EventFields&) { return ReplayStep::kGoOn; }
  void on_record(const proto::Record& record) {
    if (record.kind_case() == proto::Record::kStart && !start_unix_ns_) start_unix_ns_ = record.start().start_unix_ns();
    if (record.kind_case() == proto::Record::kEnd && model_) model_->apply_end(record.end());
  }
  std::optional<uint64_t> start_unix_ns() const { return start_unix_ns_; }

 private:
  MemoryModel* model_;
  std::optional<uint64_t> start_unix_ns_;
};

// The member's start_unix_ns, or the error that says why its events cannot be put on the wall clock.
uint64_t wall_clock_start(const CombinedMember& member, const StartObserver& observer) {
  if (!observer.start_unix_ns())
    throw CombinedTraceError(member.trace, TraceError("no TraceStart record: its events cannot be put on the wall "
                                                      "clock to combine them with other processes'",
                                                      TraceError::kWholeFile));
  if (*observer.start_unix_ns() == 0)
    throw CombinedTraceError(member.trace, TraceError("its TraceStart has no start_unix_ns (CLOCK_REALTIME): its "
                                                      "events cannot be put on the wall clock to combine them with "
                                                      "other processes'",
                                                      TraceError::kWholeFile));
  return *observer.start_unix_ns();
}

// What one member's replay spilled, besides the bytes.
struct SpilledMember {
  CombinedSeries::Stretch stretch;
  TraceReadSummary read;
  int64_t min_time_ns = 0, max_time_ns = 0;  // of its changes, since its start
};

// Replays `member`'s trace twice (layers, then totals) and spills each change of its ordinal's totals.
SpilledMember spill_member(const CombinedMember& member, SpillWriter& spill) {
  SpilledMember out;
  std::map<int32_t, LayerHint> hints;
  {
    MemoryModel layers;
    StartObserver observer;
    replay_trace(member.trace, {}, layers, observer);
    out.stretch.start_unix_ns = wall_clock_start(member, observer);
    hints = layers.layer_hints();
  }
  out.stretch.begin = spill.offset();
  MemoryModel model;
  int64_t last_time_ns = 0;
  uint64_t last_allocated = 0, last_reserved = 0;
  auto note = [&](int64_t time_ns, const DeviceTotals& totals) {
    if (totals.allocated_bytes == last_allocated && totals.reserved_bytes == last_reserved) return;
    spill.put(zigzag(uint64_t(time_ns) - uint64_t(last_time_ns)));
    spill.put(zigzag(totals.allocated_bytes - last_allocated));
    spill.put(zigzag(totals.reserved_bytes - last_reserved));
    out.min_time_ns = out.stretch.changes ? std::min(out.min_time_ns, time_ns) : time_ns;
    out.max_time_ns = out.stretch.changes ? std::max(out.max_time_ns, time_ns) : time_ns;
    ++out.stretch.changes;
    last_time_ns = time_ns;
    last_allocated = totals.allocated_bytes;
    last_reserved = totals.reserved_bytes;
  };
  model.set_totals_callback([&](int32_t device, int64_t time_ns, const DeviceTotals& totals) {
    if (device == member.ordinal) note(time_ns, totals);
  });
  StartObserver observer(&model);
  out.read = replay_trace(member.trace, hints, model, observer).read;
  // The process is gone at the end of its trace (exit, a signal, exec; or, for a trace cut short, its last
  // event: when it died after that is not known), and the driver with it freed everything it held on the GPU.
  note(std::max(model.now_ns(), last_time_ns), DeviceTotals{});
  out.stretch.end = spill.offset();
  return out;
}

// Reads one member's stretch of the spill back, a change at a time, through a buffer of its own (pread: the
// readers share the file descriptor, not a file position).
class SpillReader {
 public:
  SpillReader(int fd, const CombinedSeries::Stretch& stretch, size_t buffer_bytes)
      : fd_(fd),
        next_offset_(stretch.begin),
        end_offset_(stretch.end),
        left_(stretch.changes),
        start_unix_ns_(stretch.start_unix_ns),
        buffer_(buffer_bytes) {}
  // The next change (wall-clock time, allocated, reserved), or false after the last.
  bool next() {
    if (left_ == 0) return false;
    --left_;
    if (end_ - pos_ < SpillWriter::kMaxRecordBytes) refill();
    time_ns_ = int64_t(uint64_t(time_ns_) + unzigzag(get()));
    allocated_bytes_ += unzigzag(get());
    reserved_bytes_ += unzigzag(get());
    return true;
  }
  uint64_t unix_ns() const { return wall_clock_ns(start_unix_ns_, time_ns_); }
  uint64_t allocated_bytes() const { return allocated_bytes_; }
  uint64_t reserved_bytes() const { return reserved_bytes_; }

 private:
  uint64_t get() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < end_; shift += 7) {
      uint8_t byte = buffer_[pos_++];
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
    }
    return value;
  }
  // Moves what is left of the buffer to its front and reads on behind it.
  void refill() {
    size_t kept = end_ - pos_;
    std::memmove(buffer_.data(), buffer_.data() + pos_, kept);
    pos_ = 0;
    end_ = kept;
    size_t want = size_t(std::min<uint64_t>(buffer_.size() - kept, end_offset_ - next_offset_));
    while (want > 0) {
      ssize_t n = ::pread(fd_, buffer_.data() + end_, want, off_t(next_offset_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw std::runtime_error(std::string("cannot read the timeline's temporary file back: ") +
                                 (n < 0 ? std::strerror(errno) : "it is shorter than written"));
      end_ += size_t(n);
      next_offset_ += uint64_t(n);
      want -= size_t(n);
    }
  }

  int fd_;
  uint64_t next_offset_, end_offset_, left_, start_unix_ns_;
  std::vector<uint8_t> buffer_;
  size_t pos_ = 0, end_ = 0;
  int64_t time_ns_ = 0;
  uint64_t allocated_bytes_ = 0, reserved_bytes_ = 0;
};

// The first moment one combined total reached its maximum, with every member's share then. The shares are a
// snapshot brought up to date only for the members that changed since it was last taken.
class PeakKeeper {
 public:
  explicit PeakKeeper(size_t members) : is_dirty_(members, false) {
    peak_.member_allocated_bytes.assign(members, 0);
    peak_.member_reserved_bytes.assign(members, 0);
  }
  void changed(size_t member) {
    if (is_dirty_[member]) return;
    is_dirty_[member] = true;
    dirty_.push_back(member);
  }
  // After a change whose combined total of this peak's kind is `total`.
  void offer(u128 total, const CombinedChange& change) {
    if (total <= best_) return;
    best_ = total;
    for (size_t m : dirty_) {
      peak_.member_allocated_bytes[m] = change.member_allocated_bytes[m];
      peak_.member_reserved_bytes[m] = change.member_reserved_bytes[m];
      is_dirty_[m] = false;
    }
    dirty_.clear();
    peak_.unix_ns = change.unix_ns;
    peak_.allocated_bytes = change.allocated_bytes;
    peak_.reserved_bytes = change.reserved_bytes;
  }
  CombinedMoment take() { return std::move(peak_); }

 private:
  CombinedMoment peak_;
  u128 best_ = 0;
  std::vector<bool> is_dirty_;
  std::vector<size_t> dirty_;
};

// The readers' buffers: 64 KiB each (a few reads per MiB of spill), less where many members would make them
// more than 16 MiB together, and never under 4 KiB.
size_t reader_buffer_bytes(size_t members) {
  constexpr size_t kMost = 64 * 1024, kLeast = 4 * 1024, kAll = 16 * 1024 * 1024;
  return std::clamp(kAll / std::max<size_t>(members, 1), kLeast, kMost);
}

}  // namespace

CombinedSeries::CombinedSeries(std::vector<CombinedMember> members) : members_(std::move(members)) {
  spill_fd_ = make_spill_file();
  try {
    SpillWriter spill(spill_fd_);
    std::optional<uint64_t> first, last;
    for (const CombinedMember& member : members_) {
      SpilledMember spilled;
      try {
        spilled = spill_member(member, spill);
      } catch (const CombinedTraceError&) {
        throw;
      } catch (const TraceError& e) {
        throw CombinedTraceError(member.trace, e);
      }
      stretches_.push_back(spilled.stretch);
      reads_.push_back(std::move(spilled.read));
      changes_ += spilled.stretch.changes;
      if (!spilled.stretch.changes) continue;
      uint64_t low = wall_clock_ns(spilled.stretch.start_unix_ns, spilled.min_time_ns);
      uint64_t high = wall_clock_ns(spilled.stretch.start_unix_ns, spilled.max_time_ns);
      first = first ? std::min(*first, low) : low;
      last = last ? std::max(*last, high) : high;
    }
    spill.flush();
    first_unix_ns_ = first.value_or(0);
    last_unix_ns_ = last.value_or(0);
  } catch (...) {
    ::close(spill_fd_);
    throw;
  }
}

CombinedSeries::~CombinedSeries() { ::close(spill_fd_); }

std::pair<CombinedMoment, CombinedMoment> CombinedSeries::merge(const CombinedChangeSink& on_change) const {
  const size_t k = members_.size();
  std::vector<SpillReader> readers;
  readers.reserve(k);
  for (const Stretch& stretch : stretches_) readers.emplace_back(spill_fd_, stretch, reader_buffer_bytes(k));
  // The heads, earliest first; ties: the lower member index. A member has one head at a time, so its own
  // changes keep their file order.
  using Head = std::pair<uint64_t, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  for (size_t m = 0; m < k; ++m)
    if (readers[m].next()) heads.emplace(readers[m].unix_ns(), m);
  std::vector<uint64_t> allocated(k, 0), reserved(k, 0);
  u128 allocated_sum = 0, reserved_sum = 0;
  PeakKeeper peak_allocated(k), peak_reserved(k);
  while (!heads.empty()) {
    auto [unix_ns, m] = heads.top();
    heads.pop();
    SpillReader& reader = readers[m];
    allocated_sum = allocated_sum - allocated[m] + reader.allocated_bytes();
    reserved_sum = reserved_sum - reserved[m] + reader.reserved_bytes();
    allocated[m] = reader.allocated_bytes();
    reserved[m] = reader.reserved_bytes();
    CombinedChange change{unix_ns, saturate(allocated_sum), saturate(reserved_sum), m, allocated, reserved};
    peak_allocated.changed(m);
    peak_reserved.changed(m);
    peak_allocated.offer(allocated_sum, change);
    peak_reserved.offer(reserved_sum, change);
    if (on_change) on_change(change);
    if (reader.next()) heads.emplace(reader.unix_ns(), m);
  }
  return {peak_allocated.take(), peak_reserved.take()};
}

namespace {

// One interval of a thinned series: its maxima, at its latest change.
struct Slot {
  bool used = false;
  CombinedMoment moment;
};

}  // namespace

CombinedTimeline combine_timelines(const std::vector<CombinedMember>& members, size_t max_points) {
  max_points = std::max<size_t>(max_points, 2);
  CombinedSeries series(members);
  CombinedTimeline out;
  out.changes = series.changes();
  std::pair<CombinedMoment, CombinedMoment> peaks;
  if (series.changes() <= max_points) {
    out.points.reserve(size_t(series.changes()));
    peaks = series.merge([&](const CombinedChange& c) {
      out.points.push_back(CombinedMoment{c.unix_ns,
                                          c.allocated_bytes,
                                          c.reserved_bytes,
                                          {c.member_allocated_bytes.begin(), c.member_allocated_bytes.end()},
                                          {c.member_reserved_bytes.begin(), c.member_reserved_bytes.end()}});
    });
  } else {
    // Intervals of `width` ns from the first change: (last - first) / width < max_points, so every change has a
    // slot.
    const uint64_t first = series.first_unix_ns();
    const uint64_t width = (series.last_unix_ns() - first) / max_points + 1;
    std::vector<Slot> slots(max_points);
    peaks = series.merge([&](const CombinedChange& c) {
      Slot& slot = slots[size_t((c.unix_ns - first) / width)];
      CombinedMoment& m = slot.moment;
      m.unix_ns = slot.used ? std::max(m.unix_ns, c.unix_ns) : c.unix_ns;
      m.allocated_bytes = slot.used ? std::max(m.allocated_bytes, c.allocated_bytes) : c.allocated_bytes;
      m.reserved_bytes = slot.used ? std::max(m.reserved_bytes, c.reserved_bytes) : c.reserved_bytes;
      slot.used = true;
    });
    for (Slot& slot : slots)
      if (slot.used) out.points.push_back(std::move(slot.moment));
  }
  out.peak_allocated = std::move(peaks.first);
  out.peak_reserved = std::move(peaks.second);
  return out;
}

}  // namespace memtrace
