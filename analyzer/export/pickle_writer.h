// Plain values (dict, list, tuple, str, int, float, bool, None) written as a Python pickle or as JSON, streaming:
// a value is written as it is produced, so that a list of millions of entries never sits in memory. What
// `memtrace export --format memory-viz` writes its snapshot with (export/memory_viz.h): `pickle.load` and PyTorch's
// memory_viz page read the pickle, the page and any JSON reader the JSON.
//
// The pickle uses protocol 4's opcodes without its optional framing (Python's pickle.loads and the page's own
// unpickler, torch/utils/viz/MemoryViz.js, read it; the page knows no other opcodes than these):
//   PROTO 4; EMPTY_DICT / EMPTY_LIST then MARK ... SETITEMS / APPENDS in batches of 1,000 items, as Python's pickler
//   batches them (the page pushes a batch's items as one call's arguments: an unbatched list of a million entries
//   would overflow its stack); MARK ... TUPLE; SHORT_BINUNICODE (under 256 bytes) / BINUNICODE; BININT1, BININT2,
//   BININT, LONG1 for integers (the smallest that holds the value, as Python picks); BINFLOAT; NEWTRUE / NEWFALSE;
//   NONE; BINPUT / LONG_BINPUT and BINGET / LONG_BINGET for values written once and referred to again (remember()).
// Strings are written as UTF-8; a byte that is not part of valid UTF-8 is written as '?' (read/utf8_repair.h),
// since both readers refuse invalid UTF-8.
//
// Both writers check the nesting as they go: a value where a dict expects a key, an end without its begin, or a
// finish() with containers open is a programming error and throws std::logic_error, never writes a malformed file.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memtrace {

class ValueWriter {
 public:
  virtual ~ValueWriter() = default;

  // Dict entries are key(), then the value. Keys are strings.
  virtual void begin_dict() = 0;
  virtual void key(std::string_view name) = 0;
  virtual void end_dict() = 0;
  virtual void begin_list() = 0;
  virtual void end_list() = 0;
  virtual void begin_tuple() = 0;  // JSON has none: an array
  virtual void end_tuple() = 0;
  virtual void string(std::string_view text) = 0;
  virtual void integer(int64_t value) = 0;
  virtual void unsigned_integer(uint64_t value) = 0;
  virtual void real(double value) = 0;  // JSON: a finite value only (NaN and infinities are written as null)
  virtual void boolean(bool value) = 0;
  virtual void none() = 0;

  // A value written more than once, under the caller's `id`: repeat(id) writes it again and answers true when
  // remember(id) was called before; else it answers false, writes nothing, and the next value written (at this
  // place) is remembered under `id`. A pickle refers back to the first copy (BINGET), JSON writes it out again.
  virtual bool repeat_or_remember(uint64_t id) = 0;

  // Ends the output (the pickle's STOP). Every container must be closed.
  virtual void finish() = 0;
};

// The pickle encoding (see the top of this file).
class PickleWriter final : public ValueWriter {
 public:
  // Writes PROTO 4 to `out` at once.
  explicit PickleWriter(std::ostream& out);

  void begin_dict() override;
  void key(std::string_view name) override;
  void end_dict() override;
  void begin_list() override;
  void end_list() override;
  void begin_tuple() override;
  void end_tuple() override;
  void string(std::string_view text) override;
  void integer(int64_t value) override;
  void unsigned_integer(uint64_t value) override;
  void real(double value) override;
  void boolean(bool value) override;
  void none() override;
  bool repeat_or_remember(uint64_t id) override;
  void finish() override;

  // Items per SETITEMS / APPENDS batch, as Python's pickler writes them.
  static constexpr uint32_t kBatchItems = 1000;

 private:
  enum class Kind : uint8_t { kDict, kList, kTuple };
  struct Open {
    Kind kind;
    uint32_t batch_items = 0;  // items (dict: pairs) since the batch's MARK; 0: no MARK written yet
    bool key_written = false;  // dict: a key waits for its value
    bool remember = false;     // remember this container under remember_id once it is closed
    uint64_t remember_id = 0;
  };
  void before_value();  // the MARK that opens a batch, checks that a dict has its key
  void after_value();   // closes a full batch
  void after_scalar();  // a scalar is a whole value: remember it if asked, then after_value()
  void close(Kind kind, char batch_opcode);
  void memo_put();
  void put(char opcode) { out_.put(opcode); }
  void put_le(uint64_t value, int bytes);

  std::ostream& out_;
  std::vector<Open> open_;
  bool remember_next_ = false;
  uint64_t remember_id_ = 0;
  std::unordered_map<uint64_t, uint32_t> memo_;  // caller's id -> memo index
  bool finished_ = false;
};

// The JSON encoding: compact (no spaces), strings escaped as RFC 8259 requires (", \ and control characters).
class JsonWriter final : public ValueWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  void begin_dict() override;
  void key(std::string_view name) override;
  void end_dict() override;
  void begin_list() override;
  void end_list() override;
  void begin_tuple() override { begin_list(); }
  void end_tuple() override { end_list(); }
  void string(std::string_view text) override;
  void integer(int64_t value) override;
  void unsigned_integer(uint64_t value) override;
  void real(double value) override;
  void boolean(bool value) override;
  void none() override;
  bool repeat_or_remember(uint64_t id) override;
  void finish() override;

 private:
  struct Open {
    bool dict = false;
    bool has_items = false;
    bool key_written = false;
    bool remember = false;
    uint64_t remember_id = 0;
    size_t capture_from = 0;  // where this container's text starts in capture_
  };
  void before_value();
  void after_value();
  void emit(std::string_view text);
  void emit_string(std::string_view text);

  std::ostream& out_;
  std::vector<Open> open_;
  bool remember_next_ = false;
  uint64_t remember_id_ = 0;
  // While some value is being remembered: its text so far (values remembered inside it share the buffer).
  std::string capture_;
  int capturing_ = 0;
  std::unordered_map<uint64_t, std::string> remembered_;
};

}  // namespace memtrace
