#include "read/read_progress.h"

#include <sys/ioctl.h>
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

TerminalReadProgress::TerminalReadProgress(int err_fd, std::ostream& err, int out_fd, std::ostream& out,
                                           ProgressBar::Clock now_ns) {
  if (!::isatty(err_fd)) return;
  bar_ = std::make_unique<ReadProgressBar>(err, std::move(now_ns));
  // One column short of the terminal's width: a line that fills the last column wraps on some terminals.
  struct winsize size {};
  if (::ioctl(err_fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 1) bar_->bar().set_max_chars(size.ws_col - 1);
  previous_ = set_read_progress(bar_.get());
  if (!::isatty(out_fd)) return;
  out_ = &out;
  out_buffer_ = out.rdbuf();
  clearing_ = std::make_unique<ClearsProgressBar>(out_buffer_, bar_->bar());
  out.rdbuf(clearing_.get());
}

TerminalReadProgress::~TerminalReadProgress() {
  if (out_) {
    out_->flush();
    out_->rdbuf(out_buffer_);
  }
  if (bar_) set_read_progress(previous_);
}

}  // namespace memtrace
