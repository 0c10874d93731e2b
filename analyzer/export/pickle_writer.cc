#include "export/pickle_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "read/utf8_repair.h"

namespace memtrace {
namespace {

// Pickle opcodes (CPython's Lib/pickle.py names).
constexpr char kProto = char(0x80), kStop = '.', kMark = '(';
constexpr char kEmptyDict = '}', kSetItems = 'u', kEmptyList = ']', kAppends = 'e', kTuple = 't';
constexpr char kShortBinUnicode = char(0x8c), kBinUnicode = 'X';
constexpr char kBinInt1 = 'K', kBinInt2 = 'M', kBinInt = 'J', kLong1 = char(0x8a), kBinFloat = 'G';
constexpr char kNewTrue = char(0x88), kNewFalse = char(0x89), kNone = 'N';
constexpr char kBinPut = 'q', kLongBinPut = 'r', kBinGet = 'h', kLongBinGet = 'j';

// `text` as valid UTF-8: invalid bytes become '?'.
std::string valid_utf8(std::string_view text) {
  std::string copy(text);
  repair_utf8(copy.data(), copy.size());
  return copy;
}

[[noreturn]] void misuse(const char* what) { throw std::logic_error(std::string("ValueWriter: ") + what); }

}  // namespace

// ---- pickle ------------------------------------------------------------------------------------------------

PickleWriter::PickleWriter(std::ostream& out) : out_(out) {
  put(kProto);
  put(char(4));
}

void PickleWriter::put_le(uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.put(char(uint8_t(value >> (8 * i))));
}

void PickleWriter::before_value() {
  if (finished_) misuse("value after finish()");
  if (open_.empty()) return;
  Open& o = open_.back();
  if (o.kind == Kind::kDict && !o.key_written) misuse("dict value without a key");
  if (o.kind != Kind::kTuple && o.batch_items == 0 && !(o.kind == Kind::kDict && o.key_written)) put(kMark);
}

void PickleWriter::after_value() {
  if (open_.empty()) return;
  Open& o = open_.back();
  if (o.kind == Kind::kTuple) return;
  if (o.kind == Kind::kDict) o.key_written = false;
  if (++o.batch_items == kBatchItems) {
    put(o.kind == Kind::kDict ? kSetItems : kAppends);
    o.batch_items = 0;
  }
}

void PickleWriter::memo_put() {
  uint32_t index = uint32_t(memo_.size());
  memo_.emplace(remember_id_, index);
  if (index < 256) {
    put(kBinPut);
    put(char(index));
  } else {
    put(kLongBinPut);
    put_le(index, 4);
  }
}

void PickleWriter::after_scalar() {
  if (remember_next_) {
    memo_put();
    remember_next_ = false;
  }
  after_value();
}

void PickleWriter::begin_dict() {
  before_value();
  put(kEmptyDict);
  open_.push_back({Kind::kDict, 0, false, remember_next_, remember_id_});
  remember_next_ = false;
}

void PickleWriter::key(std::string_view name) {
  if (open_.empty() || open_.back().kind != Kind::kDict || open_.back().key_written) misuse("key outside a dict");
  if (open_.back().batch_items == 0) put(kMark);
  // A key is a string value; it never counts as an item on its own.
  std::string text = valid_utf8(name);
  if (text.size() < 256) {
    put(kShortBinUnicode);
    put(char(text.size()));
  } else {
    put(kBinUnicode);
    put_le(text.size(), 4);
  }
  out_.write(text.data(), std::streamsize(text.size()));
  open_.back().key_written = true;
}

void PickleWriter::close(Kind kind, char batch_opcode) {
  if (open_.empty() || open_.back().kind != kind) misuse("end without its begin");
  Open o = open_.back();
  if (o.kind == Kind::kDict && o.key_written) misuse("dict key without a value");
  open_.pop_back();
  if (kind == Kind::kTuple) put(kTuple);
  else if (o.batch_items > 0) put(batch_opcode);
  if (o.remember) {
    remember_id_ = o.remember_id;
    memo_put();
  }
  after_value();
}

void PickleWriter::end_dict() { close(Kind::kDict, kSetItems); }

void PickleWriter::begin_list() {
  before_value();
  put(kEmptyList);
  open_.push_back({Kind::kList, 0, false, remember_next_, remember_id_});
  remember_next_ = false;
}

void PickleWriter::end_list() { close(Kind::kList, kAppends); }

void PickleWriter::begin_tuple() {
  before_value();
  put(kMark);
  open_.push_back({Kind::kTuple, 0, false, remember_next_, remember_id_});
  remember_next_ = false;
}

void PickleWriter::end_tuple() { close(Kind::kTuple, kTuple); }

void PickleWriter::string(std::string_view text_in) {
  before_value();
  std::string text = valid_utf8(text_in);
  if (text.size() < 256) {
    put(kShortBinUnicode);
    put(char(text.size()));
  } else {
    put(kBinUnicode);
    put_le(text.size(), 4);
  }
  out_.write(text.data(), std::streamsize(text.size()));
  after_scalar();
}

void PickleWriter::integer(int64_t value) {
  before_value();
  if (value >= 0 && value <= 0xff) {
    put(kBinInt1);
    put_le(uint64_t(value), 1);
  } else if (value >= 0 && value <= 0xffff) {
    put(kBinInt2);
    put_le(uint64_t(value), 2);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    put(kBinInt);
    put_le(uint64_t(value), 4);
  } else {
    // LONG1: the fewest little-endian two's-complement bytes that keep the sign (Python's encode_long).
    uint8_t bytes[8];
    int n = 0;
    for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(uint64_t(value) >> (8 * i));
    for (n = 8; n > 1; --n) {
      bool top_redundant = value < 0 ? (bytes[n - 1] == 0xff && (bytes[n - 2] & 0x80))
                                     : (bytes[n - 1] == 0x00 && !(bytes[n - 2] & 0x80));
      if (!top_redundant) break;
    }
    put(kLong1);
    put(char(n));
    out_.write(reinterpret_cast<const char*>(bytes), n);
  }
  after_scalar();
}

void PickleWriter::unsigned_integer(uint64_t value) {
  if (value <= uint64_t(INT64_MAX)) return integer(int64_t(value));
  before_value();
  put(kLong1);  // 2^63 and above: eight bytes and a zero byte for the sign
  put(char(9));
  put_le(value, 8);
  put(char(0));
  after_scalar();
}

void PickleWriter::real(double value) {
  before_value();
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put(kBinFloat);
  for (int i = 7; i >= 0; --i) out_.put(char(uint8_t(bits >> (8 * i))));  // big-endian
  after_scalar();
}

void PickleWriter::boolean(bool value) {
  before_value();
  put(value ? kNewTrue : kNewFalse);
  after_scalar();
}

void PickleWriter::none() {
  before_value();
  put(kNone);
  after_scalar();
}

bool PickleWriter::repeat_or_remember(uint64_t id) {
  auto it = memo_.find(id);
  if (it == memo_.end()) {
    remember_next_ = true;
    remember_id_ = id;
    return false;
  }
  before_value();
  if (it->second < 256) {
    put(kBinGet);
    put(char(it->second));
  } else {
    put(kLongBinGet);
    put_le(it->second, 4);
  }
  after_value();
  return true;
}

void PickleWriter::finish() {
  if (!open_.empty()) misuse("finish() with containers open");
  if (finished_) misuse("finish() twice");
  put(kStop);
  finished_ = true;
}

// ---- JSON --------------------------------------------------------------------------------------------------

void JsonWriter::emit(std::string_view text) {
  out_.write(text.data(), std::streamsize(text.size()));
  if (capturing_ > 0) capture_.append(text);
}

void JsonWriter::emit_string(std::string_view text_in) {
  std::string text = valid_utf8(text_in);
  std::string escaped;
  escaped.reserve(text.size() + 2);
  escaped.push_back('"');
  for (char c : text) {
    if (c == '"' || c == '\\') {
      escaped.push_back('\\');
      escaped.push_back(c);
    } else if (uint8_t(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", unsigned(uint8_t(c)));
      escaped += code;
    } else {
      escaped.push_back(c);
    }
  }
  escaped.push_back('"');
  emit(escaped);
}

void JsonWriter::before_value() {
  if (open_.empty()) return;
  Open& o = open_.back();
  if (o.dict) {
    if (!o.key_written) misuse("dict value without a key");
    return;  // key() wrote the separator
  }
  if (o.has_items) emit(",");
  o.has_items = true;
}

void JsonWriter::after_value() {
  if (!open_.empty() && open_.back().dict) open_.back().key_written = false;
}

void JsonWriter::begin_dict() {
  before_value();
  Open o;
  o.dict = true;
  o.remember = remember_next_;
  o.remember_id = remember_id_;
  if (remember_next_) {
    ++capturing_;
    remember_next_ = false;
  }
  o.capture_from = capture_.size();
  open_.push_back(o);
  emit("{");
}

void JsonWriter::key(std::string_view name) {
  if (open_.empty() || !open_.back().dict || open_.back().key_written) misuse("key outside a dict");
  if (open_.back().has_items) emit(",");
  open_.back().has_items = true;
  emit_string(name);
  emit(":");
  open_.back().key_written = true;
}

void JsonWriter::end_dict() {
  if (open_.empty() || !open_.back().dict) misuse("end without its begin");
  if (open_.back().key_written) misuse("dict key without a value");
  emit("}");
  Open o = open_.back();
  open_.pop_back();
  if (o.remember) {
    remembered_.emplace(o.remember_id, capture_.substr(o.capture_from));
    if (--capturing_ == 0) capture_.clear();
  }
  after_value();
}

void JsonWriter::begin_list() {
  before_value();
  Open o;
  o.remember = remember_next_;
  o.remember_id = remember_id_;
  if (remember_next_) {
    ++capturing_;
    remember_next_ = false;
  }
  o.capture_from = capture_.size();
  open_.push_back(o);
  emit("[");
}

void JsonWriter::end_list() {
  if (open_.empty() || open_.back().dict) misuse("end without its begin");
  emit("]");
  Open o = open_.back();
  open_.pop_back();
  if (o.remember) {
    remembered_.emplace(o.remember_id, capture_.substr(o.capture_from));
    if (--capturing_ == 0) capture_.clear();
  }
  after_value();
}

void JsonWriter::string(std::string_view text) {
  before_value();
  size_t from = capture_.size();
  bool remember = remember_next_;
  if (remember) ++capturing_;
  emit_string(text);
  if (remember) {
    remembered_.emplace(remember_id_, capture_.substr(from));
    if (--capturing_ == 0) capture_.clear();
    remember_next_ = false;
  }
  after_value();
}

void JsonWriter::integer(int64_t value) {
  before_value();
  char text[32];
  std::snprintf(text, sizeof text, "%lld", static_cast<long long>(value));
  bool remember = remember_next_;
  if (remember) remembered_.emplace(remember_id_, text);
  remember_next_ = false;
  emit(text);
  after_value();
}

void JsonWriter::unsigned_integer(uint64_t value) {
  before_value();
  char text[32];
  std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(value));
  if (remember_next_) remembered_.emplace(remember_id_, text);
  remember_next_ = false;
  emit(text);
  after_value();
}

void JsonWriter::real(double value) {
  before_value();
  char text[40];
  if (std::isfinite(value)) std::snprintf(text, sizeof text, "%.17g", value);
  else std::snprintf(text, sizeof text, "null");
  if (remember_next_) remembered_.emplace(remember_id_, text);
  remember_next_ = false;
  emit(text);
  after_value();
}

void JsonWriter::boolean(bool value) {
  before_value();
  if (remember_next_) remembered_.emplace(remember_id_, value ? "true" : "false");
  remember_next_ = false;
  emit(value ? "true" : "false");
  after_value();
}

void JsonWriter::none() {
  before_value();
  if (remember_next_) remembered_.emplace(remember_id_, "null");
  remember_next_ = false;
  emit("null");
  after_value();
}

bool JsonWriter::repeat_or_remember(uint64_t id) {
  auto it = remembered_.find(id);
  if (it == remembered_.end()) {
    remember_next_ = true;
    remember_id_ = id;
    return false;
  }
  before_value();
  emit(it->second);
  after_value();
  return true;
}

void JsonWriter::finish() {
  if (!open_.empty()) misuse("finish() with containers open");
}

}  // namespace memtrace
