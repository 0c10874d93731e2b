// A progress bar for long work, drawn on one terminal line and redrawn in place with '\r':
//   memtrace: reading train.mtrace, pass 2  42% (1.20 GiB of 2.90 GiB)
// It stays silent for the first second of the work (short commands print nothing extra), redraws at most ten
// times a second (a redraw is a write to the terminal), and clears its line at the end of each piece of work,
// so that what the command prints next starts on a clean line. Whether to draw at all (stderr is a terminal) is
// the caller's decision: read/read_progress.h installs one for the trace reader only then.
// The clock and the stream are given, so that tests drive it with a fake clock and a stringstream.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <streambuf>
#include <string>

namespace memtrace {

class ProgressBar {
 public:
  // Nanoseconds on a clock that never goes back (steady_now_ns for the real one).
  using Clock = std::function<int64_t()>;
  // Nothing is drawn before kDelayNs after the bar was made; redraws come at least kRedrawIntervalNs apart.
  static constexpr int64_t kDelayNs = 1'000'000'000;
  static constexpr int64_t kRedrawIntervalNs = 100'000'000;

  // The bar's delay starts now (`now_ns()` is read here).
  ProgressBar(std::ostream& out, Clock now_ns);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Starts a piece of work named `what` ("reading train.mtrace"; shown as given: the caller makes it
  // terminal-safe and short enough for one line) of `total_bytes`. Ends the previous piece if it is not ended.
  void begin(std::string what, uint64_t total_bytes);
  // `done_bytes` of the piece are done (clamped to its total). Draws if the delay has passed and the last
  // redraw is kRedrawIntervalNs old: one clock read per call otherwise.
  void update(uint64_t done_bytes);
  // Clears the line if anything was drawn for this piece; nothing otherwise.
  void end();
  // Clears the line if it shows the bar, for other output to the same terminal (ClearsProgressBar); the next
  // update() draws it again, kRedrawIntervalNs after the last drawing.
  void hide();

  // The line update() draws, without the '\r': "memtrace: WHAT  42% (1.20 GiB of 2.90 GiB)", the
  // sizes as format_bytes writes them, without the exact count.
  static std::string line(const std::string& what, uint64_t done_bytes, uint64_t total_bytes);
  // The same line fitted into `max_chars` bytes (0: no limit): the figures at its end are kept and WHAT is cut
  // (at a UTF-8 character boundary), so that on a narrow terminal the line does not wrap (a wrapped line cannot be
  // redrawn in place with '\r'). A UTF-8 character takes one column and up to four bytes: bytes are a safe bound.
  static std::string fitted_line(const std::string& what, uint64_t done_bytes, uint64_t total_bytes, size_t max_chars);
  // Lines drawn from now on are fitted into `max_chars` bytes (0: no limit, the default).
  void set_max_chars(size_t max_chars) { max_chars_ = max_chars; }
  // CLOCK_MONOTONIC in nanoseconds (std::chrono::steady_clock).
  static int64_t steady_now_ns();

 private:
  std::ostream& out_;
  Clock now_ns_;
  int64_t start_ns_;
  std::string what_;
  uint64_t total_bytes_ = 0;
  bool drawn_ = false;        // the current piece has drawn at least once
  int64_t last_draw_ns_ = 0;  // when it last did
  size_t drawn_chars_ = 0;    // the length of the line on the terminal now (0: none)
  size_t max_chars_ = 0;      // set_max_chars
};

// A stream buffer for output that shares the bar's terminal (stdout, when stderr and stdout are both the terminal):
// before passing anything on to `target`, it clears the bar's line, so that what a command prints while it reads a
// trace (`memtrace dump`, `memtrace timeline`) is not written over the bar; the bar is redrawn below it at its next
// update. Unbuffered itself: `target` buffers as it did.
class ClearsProgressBar : public std::streambuf {
 public:
  ClearsProgressBar(std::streambuf* target, ProgressBar& bar) : target_(target), bar_(bar) {}

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override { return target_->pubsync(); }

 private:
  std::streambuf* target_;
  ProgressBar& bar_;
};

}  // namespace memtrace
