#include "read/read_progress.h"

#include <unistd.h>

#include "util/terminal_text.h"

namespace memtrace {
namespace {

ReadProgress* installed = nullptr;

}  // namespace

ReadProgress* read_progress() { return installed; }

ReadProgress* set_read_progress(ReadProgress* progress) {
  ReadProgress* previous = installed;
  installed = progress;
  return previous;
}

std::string ReadProgressBar::what(const std::string& path, uint64_t pass) {
  const size_t slash = path.find_last_of('/');
  std::string name = terminal_safe(slash == std::string::npos ? path : path.substr(slash + 1));
  if (name.size() > kMaxNameChars) {
    size_t from = name.size() - (kMaxNameChars - 3);
    while (from < name.size() && (static_cast<unsigned char>(name[from]) & 0xC0) == 0x80) ++from;  // whole UTF-8
    name = "..." + name.substr(from);
  }
  return "reading " + name + (pass > 1 ? ", pass " + std::to_string(pass) : "");
}

void ReadProgressBar::begin_read(const std::string& path, uint64_t file_bytes) {
  bar_.begin(what(path, ++reads_of_path_[path]), file_bytes);
}

TerminalReadProgress::TerminalReadProgress(int fd, std::ostream& out, ProgressBar::Clock now_ns) {
  if (!::isatty(fd)) return;
  bar_ = std::make_unique<ReadProgressBar>(out, std::move(now_ns));
  previous_ = set_read_progress(bar_.get());
}

TerminalReadProgress::~TerminalReadProgress() {
  if (bar_) set_read_progress(previous_);
}

}  // namespace memtrace
