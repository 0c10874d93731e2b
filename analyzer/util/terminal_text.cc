#include "util/terminal_text.h"

#include <cstdint>

namespace memtrace {
namespace {

void append_hex_byte(std::string& out, unsigned char byte) {
  static const char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[byte >> 4];
  out += kDigits[byte & 0xF];
}

void append_code_point(std::string& out, uint32_t code_point) {
  static const char kDigits[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kDigits[code_point >> shift & 0xF];
}

// The length of the valid UTF-8 sequence at the start of `text` (1 to 4) and its code point, or 0 when the
// first byte does not start one: a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or a
// sequence cut short.
size_t decode_utf8(std::string_view text, uint32_t* code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t value = 0, minimum = 0;
  if (lead >= 0xC2 && lead <= 0xDF) length = 2, value = lead & 0x1F, minimum = 0x80;
  else if (lead >= 0xE0 && lead <= 0xEF) length = 3, value = lead & 0x0F, minimum = 0x800;
  else if (lead >= 0xF0 && lead <= 0xF4) length = 4, value = lead & 0x07, minimum = 0x10000;
  else return 0;
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    value = value << 6 | (byte(i) & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *code_point = value;
  return length;
}

bool reorders_text(uint32_t code_point) {
  return (code_point >= 0x202A && code_point <= 0x202E) || (code_point >= 0x2066 && code_point <= 0x2069);
}

}  // namespace

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      if (c == '\\') out += '\\';
      out += char(c);
      ++i;
    } else if (c < 0x80) {  // C0 controls and DEL
      if (c == '\t') out += "\\t";
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else append_hex_byte(out, c);
      ++i;
    } else {
      uint32_t code_point = 0;
      const size_t length = decode_utf8(text.substr(i), &code_point);
      if (length == 0) {
        append_hex_byte(out, c);
        ++i;
      } else {
        if (code_point <= 0x9F || reorders_text(code_point)) append_code_point(out, code_point);  // C1: >= 0x80
        else out.append(text.substr(i, length));
        i += length;
      }
    }
  }
  return out;
}

std::string json_terminal_safe(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size());
  size_t i = 0;
  while (i < json_text.size()) {
    const unsigned char c = static_cast<unsigned char>(json_text[i]);
    uint32_t code_point = c;
    size_t length = 1;
    if (c >= 0x80) {
      length = decode_utf8(json_text.substr(i), &code_point);
      if (length == 0) code_point = c, length = 1;  // not UTF-8: left as it is (dump's replace never writes it)
    }
    if (code_point == 0x7F || (code_point >= 0x80 && code_point <= 0x9F) || reorders_text(code_point))
      append_code_point(out, code_point);
    else out.append(json_text.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace memtrace
