// How far the trace reader has got, for a person watching a terminal: read_chunks (trace_reader.h) tells the
// process's ReadProgress, where one is installed, when a read of a file begins, after each complete chunk (a few
// MiB of events: one virtual call per chunk, nothing per event), and when the read ends, by return or by throw.
// Every command reads its trace through read_chunks, once or more (a second pass to a peak, a replay for an
// export), so installing one here gives every command and every pass its progress bar.
// The memtrace binary installs a TerminalReadProgress on stderr (cli/main.cc); library callers (the tests, the
// fuzzers) install none and get nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "util/progress.h"

namespace memtrace {

class ReadProgress {
 public:
  virtual ~ReadProgress() = default;
  // A read of the trace at `path`, `file_bytes` long, begins.
  virtual void begin_read(const std::string& path, uint64_t file_bytes) = 0;
  // The chunks up to file offset `complete_bytes` are read.
  virtual void chunk_read(uint64_t complete_bytes) = 0;
  // The read ended (also when it threw).
  virtual void end_read() = 0;
};

// The installed ReadProgress, nullptr for none (the default). The analyzer reads on one thread: install before
// reading, from that thread.
ReadProgress* read_progress();
// Installs `progress` (nullptr: none) and returns the one it replaces.
ReadProgress* set_read_progress(ReadProgress* progress);

// A ReadProgress that draws a ProgressBar: "reading NAME" for the first read of a file, "reading NAME, pass N" for
// its Nth, NAME the file's name without its folder, terminal-safe (util/terminal_text.h), and cut to its last
// kMaxNameChars characters, "..." before them, so that the line fits a terminal's width.
class ReadProgressBar final : public ReadProgress {
 public:
  static constexpr size_t kMaxNameChars = 40;
  ReadProgressBar(std::ostream& out, ProgressBar::Clock now_ns) : bar_(out, std::move(now_ns)) {}
  void begin_read(const std::string& path, uint64_t file_bytes) override;
  void chunk_read(uint64_t complete_bytes) override { bar_.update(complete_bytes); }
  void end_read() override { bar_.end(); }
  ProgressBar& bar() { return bar_; }
  // What begin_read names a read of `path` that is its `pass`th (from 1).
  static std::string what(const std::string& path, uint64_t pass);

 private:
  ProgressBar bar_;
  std::map<std::string, uint64_t> reads_of_path_;
};

// For its lifetime, where `err_fd` is a terminal (isatty): a ReadProgressBar drawing on `err` is installed, and where
// `out_fd` is a terminal too, `out` writes through a ClearsProgressBar (util/progress.h), so that what a command
// prints while it reads is not written over the bar. Where `err_fd` is not a terminal (a file, a pipe), nothing:
// what scripts and tests capture stays exactly as it was.
class TerminalReadProgress {
 public:
  TerminalReadProgress(int err_fd, std::ostream& err, int out_fd, std::ostream& out,
                       ProgressBar::Clock now_ns = ProgressBar::steady_now_ns);
  ~TerminalReadProgress();
  TerminalReadProgress(const TerminalReadProgress&) = delete;
  TerminalReadProgress& operator=(const TerminalReadProgress&) = delete;
  bool active() const { return bar_ != nullptr; }

 private:
  std::unique_ptr<ReadProgressBar> bar_;
  ReadProgress* previous_ = nullptr;
  std::ostream* out_ = nullptr;  // with its own buffer replaced by clearing_, which passes on to out_buffer_
  std::streambuf* out_buffer_ = nullptr;
  std::unique_ptr<ClearsProgressBar> clearing_;
};

}  // namespace memtrace
