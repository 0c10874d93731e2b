#include "read/trace_end.h"

#include <cstring>

namespace memtrace {

std::string signal_name(int signal) {
  // sigabbrev_np (glibc >= 2.32) knows this system's numbering; nullptr for numbers it does not.
  const char* abbrev = signal > 0 && signal < 128 ? sigabbrev_np(signal) : nullptr;
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string end_how_name(const proto::TraceEnd& end) {
  if (proto::TraceEnd_How_IsValid(end.how())) return proto::TraceEnd_How_Name(end.how());
  return "HOW_" + std::to_string(int(end.how()));
}

std::string describe_end(const std::optional<proto::TraceEnd>& end) {
  if (!end) return "no end record (cut off: kill -9, crash or write error)";
  switch (end->how()) {
    case proto::TraceEnd::EXIT: return "process ended normally";
    case proto::TraceEnd::UNDERSCORE_EXIT: return "ended with _exit";
    case proto::TraceEnd::SIGNAL:
      return "killed by signal " + std::to_string(end->signal()) + " (" + signal_name(end->signal()) + ")";
    case proto::TraceEnd::EXEC: return "replaced by exec";
    case proto::TraceEnd::DETACH: return "detached (the process ran on)";
    case proto::TraceEnd::SNAPSHOT_DONE: return "snapshot written (the process ran on)";
    default: return "ended in a way this memtrace does not know (" + end_how_name(*end) + ")";
  }
}

std::string notice_code_name(int code) {
  const std::string& name = proto::Notice_Code_Name(code);
  return name.empty() ? std::to_string(code) : name;  // a code this analyzer does not know, by its number
}

}  // namespace memtrace
