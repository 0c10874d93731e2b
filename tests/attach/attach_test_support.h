// What the attach tests share: attach_target started as a child of the test (its stdout on a pipe), its expected
// output worked out here, whether this machine lets a process ptrace its own child, and the memtrace binary run.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace memtrace::test {

// A running attach_target: its pid and the read end of its stdout.
struct Target {
  pid_t pid = -1;
  int out_fd = -1;
};

// Starts attach_target (or `program`) ITERATIONS SLEEP_US [LIBRARY] with `environment` ("NAME=VALUE") added; as
// uid/gid `uid` when not -1 (the test runs as root).
Target start_target(long iterations, long sleep_us, const std::vector<std::string>& environment = {},
                    const std::string& library = {}, int uid = -1, const std::string& program = ATTACH_TARGET);

// Reads the target's stdout to its end and reaps it: its output; `exit_status` its exit status (-1: a signal).
std::string finish_target(Target* target, int* exit_status);

// Kills and reaps it.
void kill_target(Target* target);

// What attach_target ITERATIONS prints: ITERATIONS dots, then its final line (the same arithmetic, here), which
// ends with how many SIGUSR1 it got.
std::string expected_target_output(long iterations, int usr1_count = 0);

// Empty where this process may ptrace a child of its own, else why not (for GTEST_SKIP).
std::string ptrace_refused_reason();

// TracerPid of /proc/PID/status (-1: no such process).
int tracer_pid_of(pid_t pid);

// A new empty directory under /tmp, mode 0755.
std::string make_temp_dir();

std::string read_file(const std::string& path);

// `memtrace ARGS` (a shell command line): exit status, stdout, stderr.
struct MemtraceRun {
  int exit_code = -1;
  std::string out, err;
};
MemtraceRun run_memtrace(const std::string& args);

}  // namespace memtrace::test
