// `memtrace attach|detach|snapshot PID` (analyzer/cli/cmd_attach.cc) run as a command: argument errors, a process
// without a tracer, one without CUDA, and the requests and replies over an endpoint the test serves itself in the
// tracer's place (proto/control_protocol.h).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "attach/control_client.h"
#include "attach_test_support.h"

namespace memtrace {
namespace {

using test::run_memtrace;

// A running attach_target whose XDG_RUNTIME_DIR is a fresh directory: its endpoint is DIR/memtrace/PID.sock.
class AttachCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir();
    chmod(dir_.c_str(), 0700);
    target_ = test::start_target(3000, 2000, {"XDG_RUNTIME_DIR=" + dir_});
    char dot;
    ASSERT_EQ(read(target_.out_fd, &dot, 1), 1);
    pid_ = std::to_string(target_.pid);
  }
  void TearDown() override {
    test::kill_target(&target_);
    std::filesystem::remove_all(dir_);
  }

  // Serves DIR/memtrace/PID.sock: answers each request line with the reply of `replies` in turn (the requests
  // into `requests`), then stops.
  std::thread serve(std::vector<std::string> replies, std::vector<std::string>* requests) {
    mkdir((dir_ + "/memtrace").c_str(), 0700);
    const std::string path = dir_ + "/memtrace/" + pid_ + ".sock";
    const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, path.c_str());
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    chmod(path.c_str(), 0600);
    EXPECT_EQ(listen(listener, 4), 0);
    return std::thread([listener, replies = std::move(replies), requests] {
      for (const std::string& reply : replies) {
        const int fd = accept(listener, nullptr, nullptr);
        std::string line;
        char c;
        while (read(fd, &c, 1) == 1 && c != '\n') line += c;
        requests->push_back(line);
        const std::string answer = reply + "\n";
        EXPECT_EQ(write(fd, answer.data(), answer.size()), ssize_t(answer.size()));
        close(fd);
      }
      close(listener);
    });
  }

  std::string dir_, pid_;
  test::Target target_;
};

TEST(AttachCliArguments, APidIsNeededAndMustBeANumber) {
  test::MemtraceRun r = run_memtrace("attach");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), "memtrace: attach needs the PID of a running process\n");
  r = run_memtrace("detach 12x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), "memtrace: PID must be a process id, not '12x'\n");
  r = run_memtrace("snapshot -o");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), "memtrace: --output needs a value\n");
  r = run_memtrace("detach 1 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), "memtrace: unexpected argument '2'\n");
}

TEST(AttachCliArguments, ADeadPidIsOneLine) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  const std::string pid = std::to_string(child);
  test::MemtraceRun r = run_memtrace("detach " + pid);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot detach from " + pid + ": no process " + pid + " is running\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(AttachCli, DetachOfAProcessWithoutATracerSaysSo) {
  test::MemtraceRun r = run_memtrace("detach " + pid_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot detach from " + pid_ + ": " + pid_ +
                       " has no memtrace tracer and has not loaded CUDA (no libcuda.so in /proc/" + pid_ +
                       "/maps): nothing is recorded there\n");
  EXPECT_EQ(r.out, "");
}

// /proc answers for a thread id too: a thread of a process is named as such, with the process to give instead.
TEST(AttachCliThread, AThreadIdIsRefusedNamingItsProcess) {
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
  std::thread thread([&] {
    tid = gettid();
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  while (tid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string id = std::to_string(tid.load()), process = std::to_string(getpid());
  test::MemtraceRun r = run_memtrace("detach " + id);
  done = true;
  thread.join();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot detach from " + id + ": " + id + " is a thread of process " + process +
                       ", not a process: give " + process + "\n");
}

TEST_F(AttachCli, AttachToAProcessWithoutCudaRefusesAndLeavesNothing) {
  test::MemtraceRun r = run_memtrace("attach " + pid_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot attach to " + pid_ + ": process " + pid_ +
                       " has not loaded CUDA (no libcuda.so in /proc/" + pid_ + "/maps): nothing to trace\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/memtrace/" + pid_ + ".inject"));
  EXPECT_EQ(test::tracer_pid_of(target_.pid), 0);
}

TEST_F(AttachCli, AttachDetachAndSnapshotSpeakTheProtocol) {
  std::vector<std::string> requests;
  std::thread server = serve({"ok dormant -", "ok /traces/job.mtrace", "ok running /traces/job.mtrace",
                              "ok /traces/job.mtrace", "ok dormant -", "ok /traces/snap.mtrace"},
                             &requests);
  test::MemtraceRun attach = run_memtrace("attach -o out-%p.mtrace " + pid_);
  test::MemtraceRun detach = run_memtrace("detach " + pid_);
  test::MemtraceRun snapshot = run_memtrace("snapshot -o /abs/snap.mtrace " + pid_);
  server.join();
  EXPECT_EQ(attach.out, "memtrace: attached to " + pid_ + ", tracing to /traces/job.mtrace\n");
  EXPECT_EQ(attach.exit_code, 0) << attach.err;
  EXPECT_EQ(detach.out, "memtrace: detached from " + pid_ + ", wrote /traces/job.mtrace\n");
  EXPECT_EQ(snapshot.out, "memtrace: wrote /traces/snap.mtrace\n");
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(requests, (std::vector<std::string>{"status", "attach " + cwd + "/out-%p.mtrace", "status", "detach",
                                                "status", "snapshot /abs/snap.mtrace"}));
}

TEST_F(AttachCli, TheTracersErrorIsTheLine) {
  std::vector<std::string> requests;
  std::thread server =
      serve({"ok running /traces/job.mtrace", "error already recording to /traces/job.mtrace"}, &requests);
  test::MemtraceRun r = run_memtrace("attach " + pid_);
  server.join();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot attach to " + pid_ + ": already recording to /traces/job.mtrace\n");
  EXPECT_EQ(requests, (std::vector<std::string>{"status", "attach "}));
}

TEST_F(AttachCli, AStaleSocketIsNoTracer) {
  std::vector<std::string> requests;
  serve({}, &requests).join();  // bound, then closed: the file of a tracer that is gone
  test::MemtraceRun r = run_memtrace("detach " + pid_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot detach from " + pid_ + ": " + pid_ +
                       " has no memtrace tracer and has not loaded CUDA (no libcuda.so in /proc/" + pid_ +
                       "/maps): nothing is recorded there\n");
}

TEST(AttachCliTracerLoaded, ATracerWithoutEndpointIsNotLoadedAgain) {
  // A library named libmemtrace.so (the marker library, copied) stands for a preloaded tracer not yet dormant.
  const std::string dir = test::make_temp_dir();
  const std::string tracer = dir + "/libmemtrace.so";
  std::filesystem::copy_file(ATTACH_MARKER_LIBRARY, tracer);
  test::Target target = test::start_target(3000, 2000, {"XDG_RUNTIME_DIR=" + dir}, tracer);
  char dot;
  ASSERT_EQ(read(target.out_fd, &dot, 1), 1);
  const std::string pid = std::to_string(target.pid);
  test::MemtraceRun r = run_memtrace("attach " + pid);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot attach to " + pid + ": process " + pid +
                       " has memtrace's tracer loaded but no endpoint open: a preloaded tracer opens it at the "
                       "process's first CUDA call with MEMTRACE_START=dormant\n");
  EXPECT_EQ(test::tracer_pid_of(target.pid), 0);
  test::kill_target(&target);
  std::filesystem::remove_all(dir);
}

TEST_F(AttachCli, ASocketOfAnotherUserIsNotTalkedTo) {
  if (getuid() != 0) GTEST_SKIP() << "needs root, to give the socket to another uid";
  std::vector<std::string> requests;
  std::thread server = serve({}, &requests);
  const std::string path = dir_ + "/memtrace/" + pid_ + ".sock";
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  test::MemtraceRun r = run_memtrace("detach " + pid_);
  server.join();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memtrace: cannot detach from " + pid_ + ": " + path +
                       " belongs to uid 65534, not to the process's uid 0: not talking to it\n");
  EXPECT_TRUE(requests.empty());
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// A second memtrace loading a tracer into the same process waits for the first one's InjectLock, then holds it.
TEST(InjectLock, ASecondHolderWaitsForTheFirst) {
  const std::string dir = test::make_temp_dir();
  chmod(dir.c_str(), 0700);
  ControlEndpoint endpoint;
  endpoint.pid = 4242;
  endpoint.uid = getuid();
  endpoint.dir = dir + "/memtrace";
  std::string why;
  auto first = std::make_unique<InjectLock>();
  ASSERT_TRUE(first->acquire(endpoint, &why)) << why;
  std::atomic<bool> second_holds{false};
  std::thread second([&] {
    InjectLock lock;
    std::string second_why;
    EXPECT_TRUE(lock.acquire(endpoint, &second_why)) << second_why;
    second_holds = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(second_holds.load());  // the first still holds it
  first.reset();
  second.join();
  EXPECT_TRUE(second_holds.load());
  struct stat lock_file {};
  EXPECT_EQ(stat((endpoint.dir + "/4242.inject.lock").c_str(), &lock_file), 0);
  EXPECT_EQ(lock_file.st_mode & 0777, 0600u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memtrace
