// The checks of attach/target_process.h on given inputs (owner, set-uid, Yama's scopes), each refusal's one line,
// and what /proc says of a running target (CUDA loaded or not, its XDG_RUNTIME_DIR).
#include "attach/target_process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "attach/control_client.h"
#include "attach_test_support.h"

namespace memtrace {
namespace {

// A process of uid 1000 as /proc would show it, CUDA loaded.
TargetProcess process_of_uid_1000() {
  TargetProcess t;
  t.pid = 4242;
  t.uid[0] = t.uid[1] = t.uid[2] = 1000;
  t.gid[0] = t.gid[1] = t.gid[2] = 1000;
  t.cuda_loaded = true;
  return t;
}

TEST(TargetChecks, TheOwnerMayAttachWithoutPrivilegeAndOthersMayNot) {
  const TargetProcess t = process_of_uid_1000();
  EXPECT_EQ(check_attachable(t, {1000, false}, -1).error, InjectError::kNone);
  EXPECT_EQ(check_attachable(t, {0, true}, -1).error, InjectError::kNone);  // root with CAP_SYS_PTRACE
  const InjectResult other = check_attachable(t, {1001, false}, -1);
  EXPECT_EQ(other.error, InjectError::kNotOwner);
  EXPECT_EQ(inject_error_message(4242, other),
            "process 4242 belongs to another user (uid 1000; you are uid 1001): only its owner, or root with "
            "CAP_SYS_PTRACE, may attach");
  // Root in a container without --cap-add=SYS_PTRACE is another user too.
  EXPECT_EQ(check_attachable(t, {0, false}, -1).error, InjectError::kNotOwner);
}

TEST(TargetChecks, SetuidSetgidAndUndumpableTargetsAreRefused) {
  TargetProcess t = process_of_uid_1000();
  t.uid[1] = 0;
  t.uid[2] = 0;
  InjectResult r = check_attachable(t, {0, true}, -1);
  EXPECT_EQ(r.error, InjectError::kSetuid);
  EXPECT_EQ(inject_error_message(7, r),
            "process 7 runs a set-uid or set-gid program (uid: real 1000, effective 0, saved 0): memtrace does not "
            "load code into one");
  t = process_of_uid_1000();
  t.gid[2] = 5;
  r = check_attachable(t, {1000, false}, -1);
  EXPECT_EQ(inject_error_message(7, r),
            "process 7 runs a set-uid or set-gid program (gid: real 1000, effective 1000, saved 5): memtrace does "
            "not load code into one");
  t = process_of_uid_1000();
  t.dumpable = false;
  r = check_attachable(t, {1000, false}, -1);
  EXPECT_EQ(inject_error_message(7, r),
            "process 7 runs a set-uid or set-gid program (it is not dumpable): memtrace does not load code into one");
}

TEST(TargetChecks, YamaScopesTwoAndThreeRefuseBeforeTryingAndSayWhatToDo) {
  const TargetProcess t = process_of_uid_1000();
  // Scope 1 depends on the target's prctl(PR_SET_PTRACER): known only when ptrace refuses.
  EXPECT_EQ(check_attachable(t, {1000, false}, 1).error, InjectError::kNone);
  EXPECT_EQ(check_attachable(t, {0, true}, 2).error, InjectError::kNone);
  const InjectResult two = check_attachable(t, {1000, false}, 2);
  EXPECT_EQ(two.error, InjectError::kYamaScope);
  EXPECT_EQ(inject_error_message(4242, two),
            "the kernel's Yama ptrace_scope is 2 (only root may trace): run memtrace as root, or with CAP_SYS_PTRACE "
            "(a container: --cap-add=SYS_PTRACE)");
  const InjectResult three = check_attachable(t, {0, true}, 3);
  EXPECT_EQ(three.error, InjectError::kYamaScope);
  EXPECT_EQ(inject_error_message(4242, three),
            "the kernel's Yama ptrace_scope is 3 (no process may be traced until reboot): start the job with "
            "LD_PRELOAD=libmemtrace.so MEMTRACE_START=dormant instead");
  EXPECT_EQ(inject_error_message(4242, {InjectError::kYamaScope, "1"}),
            "the kernel's Yama ptrace_scope is 1 (a process may trace only its own descendants): run memtrace as "
            "root, or have the job allow it with prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), or set "
            "/proc/sys/kernel/yama/ptrace_scope to 0");
}

TEST(TargetChecks, AProcessWithoutCudaHasNothingToTrace) {
  TargetProcess t = process_of_uid_1000();
  t.cuda_loaded = false;
  const InjectResult r = check_attachable(t, {1000, false}, -1);
  EXPECT_EQ(r.error, InjectError::kNoCuda);
  EXPECT_EQ(inject_error_message(4242, r),
            "process 4242 has not loaded CUDA (no libcuda.so in /proc/4242/maps): nothing to trace");
}

TEST(TargetChecks, AProcessInAnotherContainerIsRefused) {
  TargetProcess t = process_of_uid_1000();
  EXPECT_EQ(namespace_refusal(t), "");
  t.other_mount_namespace = true;
  EXPECT_EQ(namespace_refusal(t),
            "process 4242 runs in another mount namespace (a container): run memtrace inside it (docker exec, "
            "kubectl exec)");
}

TEST(TargetChecks, TheOtherLines) {
  EXPECT_EQ(inject_error_message(9, {InjectError::kNoSafePoint, "5000"}),
            "process 9 reached no safe point within 5000 ms (a thread in, or returning from, a system call where a "
            "library may be "
            "loaded); try again, or start it with MEMTRACE_START=dormant");
  EXPECT_EQ(inject_error_message(9, {InjectError::kNoSuchProcess, "it exited during the injection"}),
            "no process 9 is running (it exited during the injection)");
  EXPECT_EQ(no_tracer_message(9, true),
            "9 has no memtrace tracer (start it with MEMTRACE_START=dormant, or `memtrace attach 9` loads one)");
  EXPECT_EQ(no_tracer_message(9, false),
            "9 has no memtrace tracer and has not loaded CUDA (no libcuda.so in /proc/9/maps): nothing is recorded "
            "there");
  EXPECT_EQ(already_traced_message(40, "gdb"),
            "ptrace refused: it is already traced by process 40 (gdb): detach that one first");
  EXPECT_EQ(already_traced_message(40, ""),
            "ptrace refused: it is already traced by process 40: detach that one first");
  EXPECT_EQ(already_traced_message(40, "memtrace"),
            "ptrace refused: it is already traced by process 40 (memtrace, loading its tracer): try again once it is "
            "done");
  EXPECT_EQ(command_name(getpid()), "attach_tests");
  TargetProcess thread;
  thread.pid = 12;
  thread.tgid = 10;
  EXPECT_EQ(thread_refusal(thread), "12 is a thread of process 10, not a process: give 10");
  thread.tgid = 12;
  EXPECT_EQ(thread_refusal(thread), "");
}

TEST(TargetProcessRead, SaysWhetherCudaIsLoadedAndTheRuntimeDir) {
  const std::string dir = test::make_temp_dir();
  test::Target plain = test::start_target(1000, 2000, {"XDG_RUNTIME_DIR=" + dir});
  // A library named libcuda.so.1 (the marker library, copied): the target "has CUDA".
  const std::string cuda = dir + "/libcuda.so.1";
  std::filesystem::copy_file(ATTACH_MARKER_LIBRARY, cuda);
  test::Target with_cuda = test::start_target(1000, 2000, {}, cuda);
  char dot;
  ASSERT_EQ(read(plain.out_fd, &dot, 1), 1);
  ASSERT_EQ(read(with_cuda.out_fd, &dot, 1), 1);

  TargetProcess t;
  ASSERT_TRUE(read_target_process(plain.pid, &t));
  EXPECT_FALSE(t.cuda_loaded);
  EXPECT_EQ(t.runtime_dir, dir);
  EXPECT_EQ(t.uid[0], getuid());
  EXPECT_TRUE(t.dumpable);
  EXPECT_FALSE(t.tracer_loaded);
  EXPECT_FALSE(t.other_mount_namespace);
  EXPECT_EQ(t.tracer_pid, 0);
  ControlEndpoint endpoint;
  std::string why;
  ASSERT_TRUE(control_endpoint_of(t, &endpoint, &why)) << why;
  EXPECT_EQ(endpoint.socket_path, dir + "/memtrace/" + std::to_string(plain.pid) + ".sock");
  EXPECT_EQ(endpoint.inject_path, dir + "/memtrace/" + std::to_string(plain.pid) + ".inject");

  ASSERT_TRUE(read_target_process(with_cuda.pid, &t));
  EXPECT_TRUE(t.cuda_loaded);
  EXPECT_EQ(t.runtime_dir, "");
  ASSERT_TRUE(control_endpoint_of(t, &endpoint, &why)) << why;
  EXPECT_EQ(endpoint.dir, "/tmp/memtrace-" + std::to_string(getuid()));

  test::kill_target(&plain);
  test::kill_target(&with_cuda);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memtrace
