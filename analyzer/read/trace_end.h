// How the traced process ended, from the trace's last record (TraceEnd.how / .signal), and what its notices
// are called: in words for the text report and as the names the JSON report uses.
#pragma once

#include <optional>
#include <string>

#include "memtrace.pb.h"

namespace memtrace {

// "process ended normally", "ended with _exit", "killed by signal 11 (SIGSEGV)", "replaced by exec";
// without an end record: "no end record (cut off: kill -9, crash or write error)".
std::string describe_end(const std::optional<proto::TraceEnd>& end);

// "EXIT", "UNDERSCORE_EXIT", "SIGNAL", "EXEC"; "HOW_<n>" for a value this memtrace does not know.
std::string end_how_name(const proto::TraceEnd& end);

// "SIGSEGV" for 11; "signal <n>" for a number this system has no name for.
std::string signal_name(int signal);

// A Notice's code as its name in memtrace.proto ("EVENTS_DROPPED"), or its number ("99") where it has none here.
std::string notice_code_name(int code);

}  // namespace memtrace
