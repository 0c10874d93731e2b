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
#include <string>
#include <thread>

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
  EXPECT_EQ(inject_error_message(pid, result),
            "process " + std::to_string(pid) +
                " reached no safe point within 300 ms (the return from a system call where a library may be "
                "loaded); try again, or start it with MEMTRACE_START=dormant");
  EXPECT_EQ(test::tracer_pid_of(pid), 0);
  ASSERT_EQ(write(in[1], "x\n", 2), 2);  // its read() returns: it runs on as before
  close(in[1]);
  test::Target blocked{pid, out[0]};
  int exit_status = 0;
  EXPECT_EQ(test::finish_target(&blocked, &exit_status), "got 2 bytes\n");
  EXPECT_EQ(exit_status, 5);
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
