// The ptrace injector (attach/injector.h) against attach_target, a running child of the test: the library's
// constructor runs inside it, the target ends with exactly its own output and exit status (every register
// restored), it is no longer traced; and each refusal is its one line.
#include "attach/injector.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "attach_test_support.h"

namespace memtrace {
namespace {

using test::Target;

constexpr long kIterations = 300;
constexpr long kSleepUs = 3000;  // ~1 s of running: time for two injections, under a loaded machine too

class Injector : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string reason = test::ptrace_refused_reason(); !reason.empty()) GTEST_SKIP() << reason;
    dir_ = test::make_temp_dir();
  }
  void TearDown() override {
    test::kill_target(&target_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Lets the target get into its loop (past its own loader) before it is injected.
  void wait_until_running() {
    char dot;
    ASSERT_EQ(read(target_.out_fd, &dot, 1), 1);
    ASSERT_EQ(dot, '.');
  }
  std::string finish(int* exit_status) { return "." + test::finish_target(&target_, exit_status); }

 public:
  const std::string& dir() const { return dir_; }
  Target& target() { return target_; }

 protected:
  std::string dir_;
  Target target_;
};

TEST_F(Injector, LoadsTheLibraryTwiceAndTheTargetEndsAsIfUntouched) {
  const std::string marker = dir_ + "/marker";
  target_ = test::start_target(kIterations, kSleepUs, {"ATTACH_MARKER=" + marker});
  wait_until_running();
  const pid_t pid = target_.pid;

  InjectResult first = inject_library(pid, ATTACH_MARKER_LIBRARY, 5000);
  ASSERT_EQ(first.error, InjectError::kNone) << inject_error_message(pid, first);
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  EXPECT_EQ(test::read_file(marker), "loaded into " + std::to_string(pid) + "\n");

  // A second library (a copy: the same path would only count up dlopen's reference), by a second seize.
  const std::string copy = dir_ + "/libattach_marker_copy.so";
  std::filesystem::copy_file(ATTACH_MARKER_LIBRARY, copy);
  InjectResult second = inject_library(pid, copy, 5000);
  ASSERT_EQ(second.error, InjectError::kNone) << inject_error_message(pid, second);
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  EXPECT_EQ(test::read_file(marker),
            "loaded into " + std::to_string(pid) + "\nloaded into " + std::to_string(pid) + "\n");

  int exit_status = 0;
  EXPECT_EQ(finish(&exit_status), test::expected_target_output(kIterations));
  EXPECT_EQ(exit_status, 7);
}

TEST_F(Injector, ASignalDuringTheCallIsDeliveredOnceAfterIt) {
  const std::string marker = dir_ + "/marker";
  target_ = test::start_target(kIterations, kSleepUs, {"ATTACH_MARKER=" + marker, "ATTACH_MARKER_SLEEP_MS=300"});
  wait_until_running();
  const pid_t pid = target_.pid;
  // Sent while the constructor sleeps inside the injected dlopen: held back, then delivered to the target's own
  // handler once its registers are back.
  std::thread signaller([pid] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(pid, SIGUSR1);
  });
  InjectResult result = inject_library(pid, ATTACH_MARKER_LIBRARY, 5000);
  signaller.join();
  ASSERT_EQ(result.error, InjectError::kNone) << inject_error_message(pid, result);
  EXPECT_EQ(test::read_file(marker), "loaded into " + std::to_string(pid) + "\n");
  int exit_status = 0;
  EXPECT_EQ(finish(&exit_status), test::expected_target_output(kIterations, 1));
  EXPECT_EQ(exit_status, 7);
}

TEST_F(Injector, AFailingDlopenSaysDlerrorsTextAndTheTargetRunsOn) {
  target_ = test::start_target(kIterations, kSleepUs);
  wait_until_running();
  const pid_t pid = target_.pid;
  InjectResult result = inject_library(pid, "/nonexistent/libmemtrace-test.so", 5000);
  EXPECT_EQ(result.error, InjectError::kDlopenFailed);
  EXPECT_EQ(inject_error_message(pid, result),
            "process " + std::to_string(pid) +
                "'s dlopen failed: /nonexistent/libmemtrace-test.so: cannot open shared object file: No such file "
                "or directory");
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  int exit_status = 0;
  EXPECT_EQ(finish(&exit_status), test::expected_target_output(kIterations));
  EXPECT_EQ(exit_status, 7);
}

TEST_F(Injector, NoSafePointInTimeLeavesTheTargetUntracedAndRunning) {
  int in[2], out[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    execl(ATTACH_BLOCKED, ATTACH_BLOCKED, nullptr);
    _exit(121);
  }
  close(in[0]);
  close(out[1]);
  // Until it blocks in read(0, ...): /proc/PID/syscall names the call it is in, and its arguments.
  for (int i = 0; i < 200 && test::read_file("/proc/" + std::to_string(pid) + "/syscall").rfind("0 0x0 ", 0) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  InjectResult result = inject_library(pid, ATTACH_MARKER_LIBRARY, 300);
  EXPECT_EQ(result.error, InjectError::kNoSafePoint);
  EXPECT_EQ(
      inject_error_message(pid, result),
      "process " + std::to_string(pid) +
          " reached no safe point within 300 ms (a thread in, or returning from, a system call where a library may be "
          "loaded); try again, or start it with MEMTRACE_START=dormant");
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  ASSERT_EQ(write(in[1], "x\n", 2), 2);  // its read() returns: it runs on as before
  close(in[1]);
  test::Target blocked{pid, out[0]};
  int exit_status = 0;
  EXPECT_EQ(test::finish_target(&blocked, &exit_status), "got 2 bytes\n");
  EXPECT_EQ(exit_status, 5);
}

// attach_waiting ARGS started as a child with `environment` added: its pid, stdout's read end, and `*stdin_fd`
// the write end of its stdin.
Target start_waiting(const std::vector<std::string>& args, const std::vector<std::string>& environment, int* stdin_fd) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    for (const std::string& variable : environment) putenv(const_cast<char*>(variable.c_str()));
    std::vector<char*> argv = {const_cast<char*>(ATTACH_WAITING)};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(121);
  }
  close(in[0]);
  close(out[1]);
  *stdin_fd = in[1];
  return {pid, out[0]};
}

// The system call number each thread of `pid` is in, from /proc/PID/task/TID/syscall (-1: running).
std::map<int, long> syscalls_of_threads(pid_t pid) {
  std::map<int, long> numbers;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const std::string text = test::read_file(entry.path().string() + "/syscall");
    numbers[std::stoi(entry.path().filename().string())] = text.rfind("running", 0) == 0 ? -1 : std::atol(text.c_str());
  }
  return numbers;
}

// Waits (at most 5 s) until the threads of `pid` are in exactly the system calls `expected` (their numbers, in
// any order). The threads as they were last seen.
std::map<int, long> wait_until_blocked_in(pid_t pid, std::multiset<long> expected) {
  std::map<int, long> threads;
  for (int i = 0; i < 500; ++i) {
    threads = syscalls_of_threads(pid);
    std::multiset<long> numbers;
    for (const auto& [tid, number] : threads) numbers.insert(number);
    if (numbers == expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return threads;
}

// x86-64's system call numbers (glibc's nanosleep is clock_nanosleep).
constexpr long kRead = 0, kClockNanosleep = 230, kRestartSyscall = 219, kFutex = 202, kPpoll = 271;

// The main thread blocked for good in pthread_join (a futex wait), its worker looping on poll(1 ms): the main
// thread, interrupted inside its wait, is the safe point; it goes back to waiting and joins as if untouched.
TEST_F(Injector, AMainThreadBlockedInPthreadJoinIsInjectedAndJoinsAfter) {
  const std::string marker = dir_ + "/marker", thread = dir_ + "/thread";
  int in_fd = -1;
  target_ = start_waiting({"join"}, {"ATTACH_MARKER=" + marker, "ATTACH_MARKER_THREAD=" + thread}, &in_fd);
  const pid_t pid = target_.pid;
  std::map<int, long> threads;
  for (int i = 0; i < 500 && !(threads = syscalls_of_threads(pid)).empty() && threads[pid] != kFutex; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(threads[pid], kFutex);
  ASSERT_EQ(threads.size(), 2u);

  InjectResult result = inject_library(pid, ATTACH_MARKER_LIBRARY, 2000);
  ASSERT_EQ(result.error, InjectError::kNone) << inject_error_message(pid, result);
  EXPECT_EQ(test::read_file(marker), "loaded into " + std::to_string(pid) + "\n");
  EXPECT_EQ(test::read_file(thread), std::to_string(pid));
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  for (int i = 0; i < 100 && syscalls_of_threads(pid)[pid] != kFutex; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(syscalls_of_threads(pid)[pid], kFutex);  // back in its wait

  ASSERT_EQ(write(in_fd, "abc\n", 4), 4);
  close(in_fd);
  int exit_status = 0;
  EXPECT_EQ(test::finish_target(&target_, &exit_status), "worker read 4 bytes\n");
  EXPECT_EQ(exit_status, 4);
}

// Every thread blocked: the main thread in read() (never a safe point), one in nanosleep (interrupted, its restart
// is never a safe point), then one in pthread_cond_wait and one in ppoll, in the order `first` names. The first of
// the last two is chosen, interrupted inside its wait; after the injection each goes back to its call: the sleep
// ends at its time with 0, the wait and the poll end when the main thread wakes them.
void inject_into_every_thread_blocked(Injector* test, const std::string& first, long chosen_syscall) {
  const std::string marker = test->dir() + "/marker", thread = test->dir() + "/thread";
  int in_fd = -1;
  Target& target = test->target();
  target =
      start_waiting({"blocked", first, "3000"}, {"ATTACH_MARKER=" + marker, "ATTACH_MARKER_THREAD=" + thread}, &in_fd);
  const pid_t pid = target.pid;
  char ready[6];
  ASSERT_EQ(read(target.out_fd, ready, sizeof ready), ssize_t(sizeof ready));
  ASSERT_EQ(std::string(ready, sizeof ready), "ready\n");
  const std::map<int, long> threads = wait_until_blocked_in(pid, {kRead, kClockNanosleep, kFutex, kPpoll});
  ASSERT_EQ(threads.size(), 4u);
  ASSERT_EQ(threads.at(pid), kRead);

  InjectResult result = inject_library(pid, ATTACH_MARKER_LIBRARY, 2000);
  ASSERT_EQ(result.error, InjectError::kNone) << inject_error_message(pid, result);
  EXPECT_EQ(test::read_file(marker), "loaded into " + std::to_string(pid) + "\n");
  const int chosen = std::atoi(test::read_file(thread).c_str());
  ASSERT_EQ(threads.count(chosen), 1u) << chosen;
  EXPECT_EQ(threads.at(chosen), chosen_syscall);
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  // Each back in its call; the sleeper's goes on as restart_syscall (the kernel's continuation of a sleep).
  std::map<int, long> after = threads;
  for (auto& [tid, number] : after)
    if (number == kClockNanosleep) number = kRestartSyscall;
  EXPECT_EQ(wait_until_blocked_in(pid, {kRead, kRestartSyscall, kFutex, kPpoll}), after);

  ASSERT_EQ(write(in_fd, "line\n", 5), 5);
  close(in_fd);
  int exit_status = 0;
  EXPECT_EQ(test::finish_target(&target, &exit_status),
            "main read 5 bytes\nslept 3000 ms in full: yes\ncondition: woken\nppoll: 1\n");
  EXPECT_EQ(exit_status, 6);
}

TEST_F(Injector, EveryThreadBlockedIsInjectedThroughAnInterruptedFutexWait) {
  inject_into_every_thread_blocked(this, "futex", kFutex);
}

TEST_F(Injector, EveryThreadBlockedIsInjectedThroughAnInterruptedPpoll) {
  inject_into_every_thread_blocked(this, "poll", kPpoll);
}

TEST_F(Injector, ADeadPidIsNoSuchProcess) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // reaped: the pid names no process now
  InjectResult result = inject_library(child, ATTACH_MARKER_LIBRARY, 1000);
  EXPECT_EQ(result.error, InjectError::kNoSuchProcess);
  EXPECT_EQ(inject_error_message(child, result), "no process " + std::to_string(child) + " is running");
}

TEST_F(Injector, AnotherUsersProcessIsRefused) {
  if (getuid() != 0) GTEST_SKIP() << "needs root, to run the injecting side as uid 65534";
  target_ = test::start_target(kIterations, kSleepUs);  // as root
  wait_until_running();
  const pid_t pid = target_.pid;
  int message[2];
  ASSERT_EQ(pipe(message), 0);
  const pid_t injector = fork();
  if (injector == 0) {
    close(message[0]);
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(1);
    InjectResult result = inject_library(pid, ATTACH_MARKER_LIBRARY, 1000);
    const std::string line = result.error == InjectError::kNotOwner ? inject_error_message(pid, result) : "wrong error";
    if (write(message[1], line.data(), line.size()) != ssize_t(line.size())) _exit(1);
    _exit(0);
  }
  close(message[1]);
  std::string line;
  char buffer[512];
  for (ssize_t n; (n = read(message[0], buffer, sizeof buffer)) > 0;) line.append(buffer, size_t(n));
  close(message[0]);
  int status = 0;
  waitpid(injector, &status, 0);
  EXPECT_EQ(line, "process " + std::to_string(pid) +
                      " belongs to another user (uid 0; you are uid 65534): only its owner, or root with "
                      "CAP_SYS_PTRACE, may attach");
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  int exit_status = 0;
  EXPECT_EQ(finish(&exit_status), test::expected_target_output(kIterations));
  EXPECT_EQ(exit_status, 7);
}

TEST_F(Injector, ASetuidTargetIsRefused) {
  if (getuid() != 0) GTEST_SKIP() << "needs root, to make a set-uid root copy of the target";
  struct statvfs mount {};
  ASSERT_EQ(statvfs(dir_.c_str(), &mount), 0);
  if (mount.f_flag & ST_NOSUID) GTEST_SKIP() << dir_ << " is mounted nosuid: a set-uid target cannot be made there";
  const std::string program = dir_ + "/attach_target_setuid";
  std::filesystem::copy_file(ATTACH_TARGET, program);
  ASSERT_EQ(chown(program.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(program.c_str(), 04755), 0);
  target_ = test::start_target(kIterations, kSleepUs, {}, {}, 65534, program);
  wait_until_running();  // past exec: its credentials are the set-uid program's
  const pid_t pid = target_.pid;
  InjectResult result = inject_library(pid, ATTACH_MARKER_LIBRARY, 1000);
  EXPECT_EQ(result.error, InjectError::kSetuid);
  EXPECT_EQ(inject_error_message(pid, result),
            "process " + std::to_string(pid) +
                " runs a set-uid or set-gid program (uid: real 65534, effective 0, saved 0): memtrace does not load "
                "code into one");
}

}  // namespace
}  // namespace memtrace
