#include "fleet/read_many.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "analysis/analysis.h"
#include "read/read_progress.h"
#include "stacks/frames.h"
#include "stacks/symbolizer.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& text, std::string_view tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

std::vector<std::string> traces_in(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code type_error;
    if (it->is_regular_file(type_error) && ends_with(it->path().filename().string(), ".mtrace"))
      found.push_back(it->path().string());
  }
  if (error) throw TraceArgError(terminal_safe(dir) + ": cannot list the directory: " + error.message());
  if (found.empty()) throw TraceArgError(terminal_safe(dir) + ": no .mtrace files in it");
  std::sort(found.begin(), found.end());
  return found;
}

// The one-line reason a trace did not read, as the single-trace commands word it (cli's report_trace_error).
std::string reason_of(const TraceError& e) {
  std::string reason = e.what();
  if (e.has_byte_offset() && !e.offset_in_what()) reason += " (at byte " + std::to_string(e.byte_offset()) + ")";
  return reason;
}

ProcessSummary read_one(const std::string& trace, const ReadManyOptions& options) {
  std::unique_ptr<Analysis> analysis = analyze_trace(trace, /*with_live_at_peak=*/false);
  Symbolizer symbolizer(analysis->stacks.modules(), options.debug_dirs);
  FrameResolver resolver(analysis->stacks, symbolizer);
  return summarize_process(*analysis, resolver, options.top_leaks);
}

uint64_t file_bytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0;
}

// One bar over all the traces' bytes, advanced as each trace is done; from any worker thread.
class CombinedProgress {
 public:
  CombinedProgress(ReadProgress* bar, const std::vector<std::string>& traces) : bar_(bar) {
    if (!bar_) return;
    uint64_t total = 0;
    for (const std::string& t : traces) total += file_bytes(t);
    bar_->begin_read(std::to_string(traces.size()) + " traces", total);
  }
  ~CombinedProgress() {
    if (bar_) bar_->end_read();
  }
  void done(const std::string& trace) {
    if (!bar_) return;
    std::lock_guard lock(mutex_);
    done_bytes_ += file_bytes(trace);
    bar_->chunk_read(done_bytes_);
  }

 private:
  ReadProgress* bar_;
  std::mutex mutex_;
  uint64_t done_bytes_ = 0;
};

}  // namespace

std::vector<std::string> expand_trace_args(const std::vector<std::string>& args) {
  std::vector<std::string> traces;
  std::set<std::string> seen;
  for (const std::string& arg : args) {
    std::vector<std::string> named;
    if (is_directory(arg)) named = traces_in(arg);
    else if (struct stat st; stat(arg.c_str(), &st) == 0) named = {arg};
    else throw TraceArgError(terminal_safe(arg) + ": no such file or directory");
    for (std::string& t : named)
      if (seen.insert(std::filesystem::path(t).lexically_normal().string()).second) traces.push_back(std::move(t));
  }
  return traces;
}

ReadManyResult read_processes(const std::vector<std::string>& traces, const ReadManyOptions& options) {
  // Outcomes by index, so the result keeps the order of `traces` whichever worker finished first.
  std::vector<std::optional<ProcessSummary>> summaries(traces.size());
  std::vector<std::optional<std::string>> errors(traces.size());
  ReadProgress* bar = set_read_progress(nullptr);  // per-file bars from several threads would race
  {
    CombinedProgress progress(bar, traces);
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < traces.size(); i = next++) {
        try {
          summaries[i] = read_one(traces[i], options);
        } catch (const TraceError& e) {
          errors[i] = reason_of(e);
        } catch (const std::exception& e) {  // out of memory, say: this trace is not read, the others are
          errors[i] = e.what();
        }
        progress.done(traces[i]);
      }
    };
    size_t threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    threads = std::min(threads, std::max<size_t>(traces.size(), 1));
    std::vector<std::thread> workers;
    for (size_t t = 1; t < threads; ++t) workers.emplace_back(work);
    work();
    for (std::thread& w : workers) w.join();
  }
  set_read_progress(bar);
  ReadManyResult result;
  for (size_t i = 0; i < traces.size(); ++i) {
    if (summaries[i]) result.processes.push_back(std::move(*summaries[i]));
    else if (errors[i]) result.unreadable.push_back({traces[i], *errors[i]});
  }
  return result;
}

}  // namespace memtrace
