#include "util/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "util/format.h"

namespace memtrace {
namespace {

// "1.20 GiB": format_bytes without the exact count, which would make the line long and busy.
std::string bytes_text(uint64_t bytes) {
  std::string text = format_bytes(bytes);
  return text.substr(0, text.find(" ("));
}

}  // namespace

ProgressBar::ProgressBar(std::ostream& out, Clock now_ns)
    : out_(out), now_ns_(std::move(now_ns)), start_ns_(now_ns_()) {}

void ProgressBar::begin(std::string what, uint64_t total_bytes) {
  end();
  what_ = std::move(what);
  total_bytes_ = total_bytes;
}

void ProgressBar::update(uint64_t done_bytes) {
  const int64_t now = now_ns_();
  if (now - start_ns_ < kDelayNs) return;
  if (drawn_ && now - last_draw_ns_ < kRedrawIntervalNs) return;
  const std::string text = fitted_line(what_, std::min(done_bytes, total_bytes_), total_bytes_, max_chars_);
  out_ << '\r' << text;
  // A shorter line than the one on the terminal ("9.9 MiB" after "10.0 MiB" cannot happen, but a new piece's
  // first line can be shorter): blank what is left of the old one.
  if (text.size() < drawn_chars_) out_ << std::string(drawn_chars_ - text.size(), ' ');
  out_.flush();
  drawn_ = true;
  last_draw_ns_ = now;
  drawn_chars_ = text.size();
}

void ProgressBar::hide() {
  if (drawn_chars_ == 0) return;
  out_ << '\r' << std::string(drawn_chars_, ' ') << '\r';
  out_.flush();
  drawn_chars_ = 0;
}

void ProgressBar::end() {
  hide();
  drawn_ = false;
}

std::string ProgressBar::line(const std::string& what, uint64_t done_bytes, uint64_t total_bytes) {
  // An empty piece is done; 128-bit so that done * 100 cannot overflow.
  const unsigned percent =
      total_bytes == 0 ? 100 : unsigned((unsigned __int128)std::min(done_bytes, total_bytes) * 100 / total_bytes);
  char numbers[16];
  std::snprintf(numbers, sizeof numbers, "%u%%", percent);
  return "memtrace: " + what + "  " + numbers + " (" + bytes_text(done_bytes) + " of " + bytes_text(total_bytes) + ")";
}

std::string ProgressBar::fitted_line(const std::string& what, uint64_t done_bytes, uint64_t total_bytes,
                                     size_t max_chars) {
  std::string text = line(what, done_bytes, total_bytes);
  if (max_chars == 0 || text.size() <= max_chars) return text;
  const std::string figures = text.substr(text.rfind("  "));  // "  42% (1.20 GiB of 2.90 GiB)": ASCII
  if (figures.size() >= max_chars) return figures.substr(2, max_chars);
  size_t keep = max_chars - figures.size();
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;  // not inside a character
  return text.substr(0, keep) + figures;
}

ClearsProgressBar::int_type ClearsProgressBar::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  bar_.hide();
  return target_->sputc(traits_type::to_char_type(c));
}

std::streamsize ClearsProgressBar::xsputn(const char* s, std::streamsize n) {
  bar_.hide();
  return target_->sputn(s, n);
}

int64_t ProgressBar::steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace memtrace
