// What `memtrace attach|detach|snapshot PID` checks about process PID before it talks to it or loads code into it,
// read from /proc: that it runs, whose it is, whether it runs a set-uid program, whether it has loaded CUDA, what
// the kernel's Yama module allows, and its XDG_RUNTIME_DIR (for the endpoint's directory, proto/control_protocol.h).
// The decisions are pure functions of what was read (check_ptrace_allowed, check_attachable), so that tests give
// them any inputs.
#pragma once
#include <string>

#include "attach/injector.h"

namespace memtrace {

// Process PID as /proc shows it.
struct TargetProcess {
  int pid = 0;
  int tgid = 0;                        // Tgid: the process's id; another than `pid` where pid is one of its threads
  unsigned uid[3] = {};                // real, effective, saved (the Uid: line of /proc/PID/status)
  unsigned gid[3] = {};                // real, effective, saved (the Gid: line)
  bool dumpable = true;                // false: /proc/PID belongs to root while the process's real uid is another
  int tracer_pid = 0;                  // TracerPid: a debugger (or an injector) already traces it
  bool cuda_loaded = false;            // a libcuda.so* is mapped (/proc/PID/maps)
  bool tracer_loaded = false;          // a libmemtrace.so is mapped: preloaded, or loaded by an earlier attach
  bool other_mount_namespace = false;  // in another container than ours: its paths are not ours
  bool environ_readable = false;
  std::string runtime_dir;  // XDG_RUNTIME_DIR of /proc/PID/environ; empty when unset or unreadable
};

// Reads /proc/PID. False when no such process runs (or it is a zombie, which cannot run anything).
bool read_target_process(int pid, TargetProcess* out);

// The line for a process already traced by process `tracer_pid` whose command name (/proc/PID/comm) is
// `tracer_name` ("" where unreadable): who holds it, and what to do.
std::string already_traced_message(int tracer_pid, const std::string& tracer_name);

// Process PID's command name (/proc/PID/comm, without the line break), or "" where it cannot be read.
std::string command_name(int pid);

// Who is asking: this process's real uid, and whether it holds CAP_SYS_PTRACE (root normally does; root in a
// container without --cap-add=SYS_PTRACE does not).
struct Privileges {
  unsigned uid = 0;
  bool cap_sys_ptrace = false;
};
Privileges privileges_of_this_process();

// /proc/sys/kernel/yama/ptrace_scope's value, or -1 where there is no Yama.
int yama_ptrace_scope();

// May `who` ptrace `target`, as far as can be told before trying? kNotOwner, kSetuid or kYamaScope (2 without
// CAP_SYS_PTRACE, 3 always; scope 1 is known only once ptrace refuses: it depends on prctl(PR_SET_PTRACER) in the
// target), else kNone. `yama_scope`: -1 for no Yama.
InjectResult check_ptrace_allowed(const TargetProcess& target, const Privileges& who, int yama_scope);

// check_ptrace_allowed, then kNoCuda when the target has not loaded CUDA: what `memtrace attach` checks before it
// loads the tracer into a process.
InjectResult check_attachable(const TargetProcess& target, const Privileges& who, int yama_scope);

// Why `target` is not a process to control, in one line, or empty: PID names one of a process's threads (/proc
// answers for thread ids too), whose process has the endpoint.
std::string thread_refusal(const TargetProcess& target);

// Why the CLI cannot serve `target` from where it runs, in one line, or empty: a process in another mount
// namespace (a container) sees other files under the same paths (the endpoint's, the library's).
std::string namespace_refusal(const TargetProcess& target);

// The one line for a Yama refusal at scope `scope` (1, 2 or 3): what the scope means and what to do.
std::string yama_message(int scope);

}  // namespace memtrace
