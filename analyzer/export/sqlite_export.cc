#include "export/sqlite_export.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/replay.h"
#include "util/format.h"

namespace memtrace {
namespace {

// The schema; docs/commands/export.md ("sqlite") says what each column holds. PRAGMA user_version is the
// schema's version, for readers that check it.
constexpr int kSchemaVersion = 1;
constexpr const char* kSchema = R"sql(
CREATE TABLE processes (
  process_id INTEGER PRIMARY KEY,
  pid INTEGER NOT NULL,
  ppid INTEGER NOT NULL,
  host TEXT NOT NULL,
  rank INTEGER,
  local_rank INTEGER,
  world_size INTEGER,
  job_id TEXT,
  argv TEXT NOT NULL,
  start_unix_ns INTEGER NOT NULL,
  end_unix_ns INTEGER NOT NULL,
  events INTEGER NOT NULL,
  truncated INTEGER NOT NULL,
  trace TEXT NOT NULL
);
CREATE TABLE devices (
  process_id INTEGER NOT NULL REFERENCES processes(process_id),
  ordinal INTEGER NOT NULL,
  gpu TEXT,
  name TEXT,
  total_bytes INTEGER,
  peak_allocated_bytes INTEGER NOT NULL,
  peak_reserved_bytes INTEGER NOT NULL,
  PRIMARY KEY (process_id, ordinal)
) WITHOUT ROWID;
CREATE TABLE events (
  start_unix_ns INTEGER NOT NULL,
  time_ns INTEGER NOT NULL,
  process_id INTEGER NOT NULL REFERENCES processes(process_id),
  pid INTEGER NOT NULL,
  event_index INTEGER NOT NULL,
  device INTEGER NOT NULL,
  gpu TEXT,
  address INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  operation TEXT NOT NULL,
  memory TEXT NOT NULL,
  layer TEXT NOT NULL,
  api TEXT NOT NULL,
  stream INTEGER NOT NULL,
  tid INTEGER NOT NULL,
  result INTEGER NOT NULL,
  stack_id INTEGER NOT NULL,
  allocated_bytes INTEGER,
  reserved_bytes INTEGER,
  device_free_bytes INTEGER,
  process_used_bytes INTEGER,
  other_processes_used_bytes INTEGER
);
CREATE TABLE frames (
  frame_id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  function TEXT NOT NULL,
  file TEXT NOT NULL,
  line INTEGER NOT NULL,
  module TEXT,
  offset INTEGER
);
CREATE TABLE stacks (
  process_id INTEGER NOT NULL REFERENCES processes(process_id),
  stack_id INTEGER NOT NULL,
  depth INTEGER NOT NULL,
  frame_id INTEGER NOT NULL REFERENCES frames(frame_id),
  PRIMARY KEY (process_id, stack_id, depth)
) WITHOUT ROWID;
)sql";

// Why SQLite failed, in the words the other formats use: the system's reason where a system call failed ("No space
// left on device"), else SQLite's own message.
std::string failure_reason(sqlite3* db) {
  if (!db) return "out of memory";
  const int code = sqlite3_errcode(db) & 0xff;  // the primary result code
  const bool system = code == SQLITE_CANTOPEN || code == SQLITE_IOERR || code == SQLITE_FULL;
  if (int error = sqlite3_system_errno(db); system && error) return std::strerror(error);
  return sqlite3_errmsg(db);
}

// SQLite's INTEGER is a signed 64-bit value: a field of 2^63 or more (only a damaged trace has one) is stored as
// the same 64 bits, and reads back negative.
int64_t as_integer(uint64_t value) { return static_cast<int64_t>(value); }

// One prepared statement, reset after each row; its bindings stay until bound again.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &statement_, nullptr) != SQLITE_OK) fail();
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Columns count from 1, as SQLite's parameters do.
  void bind(int column, int64_t value) { check(sqlite3_bind_int64(statement_, column, value)); }
  void bind(int column, std::optional<int64_t> value) {
    if (value) bind(column, *value);
    else bind_null(column);
  }
  // `text` must outlive the next step() (SQLITE_STATIC: no copy, for the names bound on every event).
  void bind_static(int column, const std::string& text) {
    check(sqlite3_bind_text(statement_, column, text.data(), int(text.size()), SQLITE_STATIC));
  }
  void bind_text(int column, const std::string& text) {
    check(sqlite3_bind_text(statement_, column, text.data(), int(text.size()), SQLITE_TRANSIENT));
  }
  void bind_null(int column) { check(sqlite3_bind_null(statement_, column)); }
  // Inserts the row; throws SqliteError where SQLite refuses it.
  void step() {
    int status = sqlite3_step(statement_);
    sqlite3_reset(statement_);
    if (status != SQLITE_DONE) fail();
  }

 private:
  void check(int status) {
    if (status != SQLITE_OK) fail();
  }
  [[noreturn]] void fail() { throw SqliteError(failure_reason(db_)); }
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
};

// An enum's values as the events table writes them: proto/memtrace.proto's names, lower-case and without the
// enum's prefix ("LAYER_DRIVER" -> "driver") where `lower_case`; a value the schema does not name (a damaged
// trace) is written as its number.
class EnumNames {
 public:
  using NameOf = const std::string& (*)(int value);
  EnumNames(NameOf name_of, const std::string& prefix, bool lower_case) {
    for (int value = 0; value < int(names_.size()); ++value) {
      std::string name = name_of(value);
      if (name.empty()) continue;
      if (name.compare(0, prefix.size(), prefix) == 0) name.erase(0, prefix.size());
      if (lower_case)
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
      names_[size_t(value)] = name;
    }
  }
  // The name of `value`, valid until the next call.
  const std::string& operator()(int value) {
    if (value >= 0 && value < int(names_.size()) && !names_[size_t(value)].empty()) return names_[size_t(value)];
    unnamed_ = std::to_string(value);
    return unnamed_;
  }

 private:
  std::array<std::string, 128> names_;  // every enum of the events table has its values below 128
  std::string unnamed_;
};

const std::string& event_kind_name(int value) { return proto::EventKind_Name(proto::EventKind(value)); }
const std::string& layer_name(int value) { return proto::Layer_Name(proto::Layer(value)); }
const std::string& memory_name(int value) { return proto::Memory_Name(proto::Memory(value)); }
const std::string& api_name(int value) { return proto::Api_Name(proto::Api(value)); }

std::string joined_argv(const proto::TraceStart& start) {
  std::string argv;
  for (const std::string& arg : start.argv()) argv += (argv.empty() ? "" : " ") + arg;
  return argv;
}

}  // namespace

struct SqliteExport::Impl {
  explicit Impl(const std::string& path);
  ~Impl() { close(); }
  void exec(const char* sql);
  // Finalizes the statements and closes the database; returns SQLite's status.
  int close();
  int64_t add_process(const Analysis& analysis);
  void add_devices(int64_t process_id, const Analysis& analysis);
  void add_events(int64_t process_id, const ExportSource& source, std::unordered_set<uint64_t>* stack_ids);
  void add_stacks(int64_t process_id, FrameResolver& resolver, const std::unordered_set<uint64_t>& stack_ids);
  int64_t frame_id(const Frame& frame);

  sqlite3* db = nullptr;
  std::unique_ptr<Statement> insert_process, insert_device, insert_event, insert_frame, insert_stack;
  // Frames by content (kind, function, file, line, module, offset as one key), across every process added.
  std::unordered_map<std::string, int64_t> frames;
  int64_t processes = 0;
};

SqliteExport::Impl::Impl(const std::string& path) {
  // SQLITE_OPEN_EXCLUSIVE is not for callers; a new file is the caller's to guarantee (a temporary name).
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    std::string what = failure_reason(db);
    close();
    throw SqliteError(what);
  }
  // The file is a temporary one until renamed into place, and a failed export removes it: no journal and no
  // syncs to pay for (a crash leaves a file the next run replaces). Rows are appended in key order (events keep
  // no index), so a small page cache serves: 8 MiB, measured as fast as 64 MiB (docs/performance.md).
  exec(
      "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE;"
      "PRAGMA cache_size = -8192;");
  exec(kSchema);
  exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
  insert_process = std::make_unique<Statement>(
      db,
      "INSERT INTO processes (process_id, pid, ppid, host, rank, local_rank, world_size, job_id, argv, start_unix_ns,"
      " end_unix_ns, events, truncated, trace) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  insert_device = std::make_unique<Statement>(
      db,
      "INSERT INTO devices (process_id, ordinal, gpu, name, total_bytes, peak_allocated_bytes, peak_reserved_bytes)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  insert_event = std::make_unique<Statement>(
      db,
      "INSERT INTO events (process_id, pid, start_unix_ns, time_ns, event_index, device, gpu, address, bytes,"
      " operation, memory, layer, api, stream, tid, result, stack_id, allocated_bytes, reserved_bytes,"
      " device_free_bytes, process_used_bytes, other_processes_used_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
      " ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)");
  insert_frame = std::make_unique<Statement>(
      db,
      "INSERT INTO frames (frame_id, kind, function, file, line, module, offset) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  insert_stack =
      std::make_unique<Statement>(db,
                                  "INSERT INTO stacks (process_id, stack_id, depth, frame_id) VALUES (?1, ?2, ?3, ?4)");
}

void SqliteExport::Impl::exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) == SQLITE_OK) return;
  std::string what = failure_reason(db);
  sqlite3_free(error);
  throw SqliteError(what);
}

int SqliteExport::Impl::close() {
  insert_process.reset(), insert_device.reset();
  insert_event.reset(), insert_frame.reset(), insert_stack.reset();
  int status = sqlite3_close(db);  // a no-op for nullptr
  db = nullptr;
  return status;
}

int64_t SqliteExport::Impl::add_process(const Analysis& analysis) {
  const proto::TraceStart start = analysis.info.start.value_or(proto::TraceStart());
  const int64_t process_id = ++processes;
  Statement& s = *insert_process;
  s.bind(1, process_id);
  s.bind(2, int64_t(start.pid()));
  s.bind(3, int64_t(start.ppid()));
  s.bind_text(4, start.hostname());
  s.bind(5, start.has_rank() ? std::optional<int64_t>(start.rank()) : std::nullopt);
  s.bind(6, start.has_local_rank() ? std::optional<int64_t>(start.local_rank()) : std::nullopt);
  s.bind(7, start.has_world_size() ? std::optional<int64_t>(start.world_size()) : std::nullopt);
  if (start.job_id().empty()) s.bind_null(8);
  else s.bind_text(8, start.job_id());
  s.bind_text(9, joined_argv(start));
  s.bind(10, as_integer(start.start_unix_ns()));
  s.bind(11, as_integer(start.start_unix_ns() + uint64_t(analysis.duration_ns())));
  s.bind(12, as_integer(analysis.model.next_event_index()));  // the events the replay writes, as the first pass read
  s.bind(13, int64_t(analysis.read.truncated));
  s.bind_text(14, analysis.path);
  s.step();
  return process_id;
}

void SqliteExport::Impl::add_devices(int64_t process_id, const Analysis& analysis) {
  // Every ordinal the trace describes (Device records) or used (events): by ordinal.
  std::vector<int32_t> ordinals;
  for (const proto::Device& d : analysis.info.devices) ordinals.push_back(int32_t(d.ordinal()));
  for (const auto& [ordinal, state] : analysis.model.devices())
    if (ordinal >= 0) ordinals.push_back(ordinal);
  std::sort(ordinals.begin(), ordinals.end());
  ordinals.erase(std::unique(ordinals.begin(), ordinals.end()), ordinals.end());
  Statement& s = *insert_device;
  s.bind(1, process_id);
  for (int32_t ordinal : ordinals) {
    s.bind(2, int64_t(ordinal));
    const proto::Device* record = ordinal >= 0 ? analysis.info.device(uint32_t(ordinal)) : nullptr;
    std::string gpu = record ? gpu_uuid_name(record->uuid()) : "";
    if (gpu.empty()) s.bind_null(3);
    else s.bind_text(3, gpu);
    if (record && !record->name().empty()) s.bind_text(4, record->name());
    else s.bind_null(4);
    s.bind(5, record ? std::optional<int64_t>(as_integer(record->total_bytes())) : std::nullopt);
    auto state = analysis.model.devices().find(ordinal);
    const bool used = state != analysis.model.devices().end();
    s.bind(6, used ? as_integer(state->second.peak_allocated().bytes) : 0);
    s.bind(7, used ? as_integer(state->second.peak_reserved().bytes) : 0);
    s.step();
  }
}

namespace {

// Inserts each event's row once the model has applied it (the model keeps the trace's clock and the totals), and
// notes the stacks the events name.
class EventRows {
 public:
  EventRows(const MemoryModel& model, Statement& insert, uint64_t start_unix_ns,
            const std::unordered_map<int32_t, std::string>& gpus, std::unordered_set<uint64_t>& stack_ids)
      : model_(model), insert_(insert), start_unix_ns_(start_unix_ns), gpus_(gpus), stack_ids_(stack_ids) {}

  ReplayStep after_event(const EventFields& e) {
    Statement& s = insert_;
    const int64_t time_ns = model_.now_ns();
    s.bind(3, as_integer(start_unix_ns_ + uint64_t(time_ns)));
    s.bind(4, time_ns);
    s.bind(5, as_integer(model_.next_event_index() - 1));
    s.bind(6, int64_t(e.device()));
    bind_gpu(e.device());
    s.bind(8, as_integer(e.address()));
    s.bind(9, as_integer(e.size()));
    s.bind_static(10, operation_(e.kind()));
    s.bind_static(11, memory_(e.memory()));
    s.bind_static(12, layer_(e.layer()));
    s.bind_static(13, api_(e.api()));
    s.bind(14, as_integer(e.stream()));
    s.bind(15, int64_t(e.tid()));
    s.bind(16, int64_t(e.result()));
    s.bind(17, as_integer(e.stack_id()));
    bind_totals(e.device());
    bind_usage(e);
    s.step();
    if (e.stack_id() != 0) stack_ids_.insert(e.stack_id());
    return ReplayStep::kGoOn;
  }

 private:
  void bind_gpu(int32_t device) {
    auto gpu = gpus_.find(device);
    if (gpu == gpus_.end()) insert_.bind_null(7);
    else insert_.bind_static(7, gpu->second);
  }
  // The device's allocated and reserved totals after the event (MemoryModel::totals); NULL for no device.
  void bind_totals(int32_t device) {
    if (!valid_device_ordinal(device) || device < 0) {
      insert_.bind_null(18);
      insert_.bind_null(19);
      return;
    }
    DeviceTotals totals = model_.totals(device);
    insert_.bind(18, as_integer(totals.allocated_bytes));
    insert_.bind(19, as_integer(totals.reserved_bytes));
  }
  // A device sample's figures (DEVICE_USAGE, and OOM: cuMemGetInfo's free bytes and NVML's where known).
  void bind_usage(const EventFields& e) {
    const bool sample = e.kind() == proto::DEVICE_USAGE || e.kind() == proto::OOM;
    if (sample) insert_.bind(20, as_integer(e.device_free_bytes()));
    else insert_.bind_null(20);
    if (e.has_process_used_bytes()) insert_.bind(21, as_integer(e.process_used_bytes()));
    else insert_.bind_null(21);
    if (e.has_other_processes_used_bytes()) insert_.bind(22, as_integer(e.other_processes_used_bytes()));
    else insert_.bind_null(22);
  }

  const MemoryModel& model_;
  Statement& insert_;
  const uint64_t start_unix_ns_;
  const std::unordered_map<int32_t, std::string>& gpus_;
  std::unordered_set<uint64_t>& stack_ids_;
  EnumNames operation_{event_kind_name, "", true};
  EnumNames memory_{memory_name, "MEMORY_", true};
  EnumNames layer_{layer_name, "LAYER_", true};
  EnumNames api_{api_name, "", false};
};

}  // namespace

void SqliteExport::Impl::add_events(int64_t process_id, const ExportSource& source,
                                    std::unordered_set<uint64_t>* stack_ids) {
  const Analysis& analysis = source.analysis();
  std::unordered_map<int32_t, std::string> gpus;
  for (const proto::Device& d : analysis.info.devices)
    if (std::string gpu = gpu_uuid_name(d.uuid()); !gpu.empty()) gpus[int32_t(d.ordinal())] = gpu;
  const uint64_t start_unix_ns = analysis.info.start ? analysis.info.start->start_unix_ns() : 0;
  insert_event->bind(1, process_id);
  insert_event->bind(2, int64_t(analysis.info.start ? analysis.info.start->pid() : 0));
  MemoryModel model;
  EventRows rows(model, *insert_event, start_unix_ns, gpus, *stack_ids);
  replay_trace(source.path(), analysis.model.layer_hints(), model, rows);
}

int64_t SqliteExport::Impl::frame_id(const Frame& frame) {
  std::string key = frame.python ? "p" : "n";
  for (const std::string* part : {&frame.function, &frame.file, &frame.module}) key += '\0' + *part;
  key += '\0' + std::to_string(frame.line) + '\0' + std::to_string(frame.module_offset);
  auto [it, added] = frames.emplace(std::move(key), int64_t(frames.size()) + 1);
  if (!added) return it->second;
  Statement& s = *insert_frame;
  s.bind(1, it->second);
  s.bind_text(2, frame.python ? "python" : "native");
  s.bind_text(3, frame.function);
  s.bind_text(4, frame.file);
  s.bind(5, int64_t(frame.line));
  if (frame.python) {
    s.bind_null(6);
    s.bind_null(7);
  } else {
    s.bind_text(6, frame.module);
    s.bind(7, as_integer(frame.module_offset));
  }
  s.step();
  return it->second;
}

void SqliteExport::Impl::add_stacks(int64_t process_id, FrameResolver& resolver,
                                    const std::unordered_set<uint64_t>& stack_ids) {
  std::vector<uint64_t> ids(stack_ids.begin(), stack_ids.end());
  std::sort(ids.begin(), ids.end());
  Statement& s = *insert_stack;
  s.bind(1, process_id);
  for (uint64_t id : ids) {
    ResolvedStack stack = resolver.resolve(id);
    s.bind(2, as_integer(id));
    for (size_t depth = 0; depth < stack.frames.size(); ++depth) {
      const int64_t frame = frame_id(stack.frames[depth]);
      s.bind(3, int64_t(depth));
      s.bind(4, frame);
      s.step();
    }
  }
}

SqliteExport::SqliteExport(const std::string& path) : impl_(std::make_unique<Impl>(path)) {}

SqliteExport::~SqliteExport() = default;

int64_t SqliteExport::add_trace(const ExportSource& source) {
  Impl& impl = *impl_;
  impl.exec("BEGIN");
  const int64_t process_id = impl.add_process(source.analysis());
  impl.add_devices(process_id, source.analysis());
  std::unordered_set<uint64_t> stack_ids;
  impl.add_events(process_id, source, &stack_ids);
  impl.add_stacks(process_id, source.resolver(), stack_ids);
  impl.exec("COMMIT");
  return process_id;
}

void SqliteExport::finish() {
  if (impl_->close() != SQLITE_OK) throw SqliteError("the database could not be closed");
}

}  // namespace memtrace
