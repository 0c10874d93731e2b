// The attach tests' shared helpers (attach_test_support.h).
#include "attach_test_support.h"

#include <signal.h>
#include <stdint.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace memtrace::test {

Target start_target(long iterations, long sleep_us, const std::vector<std::string>& environment,
                    const std::string& library, int uid, const std::string& program) {
  int out[2];
  if (pipe(out) != 0) std::abort();
  Target target;
  target.pid = fork();
  if (target.pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    unsetenv("XDG_RUNTIME_DIR");  // a test that wants one gives it
    for (const std::string& variable : environment) putenv(const_cast<char*>(variable.c_str()));
    if (uid >= 0 && (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)) _exit(120);
    const std::string count = std::to_string(iterations), pause = std::to_string(sleep_us);
    std::vector<char*> argv = {const_cast<char*>(program.c_str()), const_cast<char*>(count.c_str()),
                               const_cast<char*>(pause.c_str())};
    if (!library.empty()) argv.push_back(const_cast<char*>(library.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(121);
  }
  close(out[1]);
  target.out_fd = out[0];
  return target;
}

std::string finish_target(Target* target, int* exit_status) {
  std::string output;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(target->out_fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buffer, size_t(n));
  }
  close(target->out_fd);
  int status = 0;
  waitpid(target->pid, &status, 0);
  *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  target->pid = -1;
  return output;
}

void kill_target(Target* target) {
  if (target->pid <= 0) return;
  kill(target->pid, SIGKILL);
  int exit_status = 0;
  finish_target(target, &exit_status);
}

std::string expected_target_output(long iterations, int usr1_count) {
  uint64_t a = 1, b = 0;
  double x = 1.0, y = 0.25;
  for (long i = 0; i < iterations; ++i) {
    a = a * 6364136223846793005ULL + 1442695040888963407ULL;
    b += a >> 33;
    x = x * 1.0000001 + 0.5;
    y = y * 0.999 + x * 1e-9;
  }
  char line[160];
  std::snprintf(line, sizeof line, "\na=%llu b=%llu x=%.17g y=%.17g usr1=%d\n", (unsigned long long)a,
                (unsigned long long)b, x, y, usr1_count);
  return std::string(size_t(iterations), '.') + line;
}

std::string ptrace_refused_reason() {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  std::string reason;
  if (ptrace(PTRACE_SEIZE, child, nullptr, nullptr) != 0)
    reason = std::string("ptrace is refused on this machine (PTRACE_SEIZE of a child of our own: ") +
             std::strerror(errno) + "; Yama or a seccomp profile): the injector cannot be tested here";
  else ptrace(PTRACE_DETACH, child, nullptr, nullptr);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return reason;
}

int tracer_pid_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("TracerPid:", 0) == 0) return std::atoi(line.c_str() + 10);
  return -1;
}

std::string make_temp_dir() {
  char path[] = "/tmp/memtrace-attach-test-XXXXXX";
  if (!mkdtemp(path)) std::abort();
  chmod(path, 0755);
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

MemtraceRun run_memtrace(const std::string& args) {
  const std::string dir = make_temp_dir();
  const std::string out = dir + "/out", err = dir + "/err";
  const int status = std::system((std::string(MEMTRACE_BIN) + " " + args + " >" + out + " 2>" + err).c_str());
  MemtraceRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_file(out);
  run.err = read_file(err);
  std::system(("rm -rf " + dir).c_str());
  return run;
}

}  // namespace memtrace::test
