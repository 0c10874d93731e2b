// Reads what `memtrace attach` checks about a process from /proc (attach/target_process.h).
#include "attach/target_process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace memtrace {
namespace {

std::string slurp(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The value after "Key:" in a /proc status text, empty when absent.
std::string status_field(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  return {};
}

// "\t0\t0\t0\t0" (real, effective, saved, filesystem) into three numbers.
void parse_ids(const std::string& text, unsigned ids[3]) {
  std::istringstream in(text);
  for (int i = 0; i < 3; ++i) in >> ids[i];
}

// Whether a file whose name starts with `prefix` is mapped: libcuda.so or libcuda.so.N... (the driver library,
// real or the test double), libmemtrace.so.
bool maps_file(const std::string& maps, const std::string& prefix) {
  std::istringstream in(maps);
  std::string line;
  while (std::getline(in, line)) {
    const size_t slash = line.rfind('/');
    if (slash != std::string::npos && line.compare(slash + 1, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

std::string link_target(const std::string& path) {
  char target[256];
  const ssize_t n = readlink(path.c_str(), target, sizeof target);
  return n > 0 ? std::string(target, size_t(n)) : std::string();
}

std::string environ_value(const std::string& environ, const std::string& name) {
  const std::string key = name + "=";
  size_t at = 0;
  while (at < environ.size()) {
    size_t end = environ.find('\0', at);
    if (end == std::string::npos) end = environ.size();
    if (environ.compare(at, key.size(), key) == 0) return environ.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return {};
}

std::string uid_triple(const char* what, const unsigned ids[3]) {
  return std::string(what) + ": real " + std::to_string(ids[0]) + ", effective " + std::to_string(ids[1]) + ", saved " +
         std::to_string(ids[2]);
}

}  // namespace

std::string command_name(int pid) {
  bool ok = false;
  std::string name = slurp("/proc/" + std::to_string(pid) + "/comm", &ok);
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return ok ? name : std::string();
}

std::string already_traced_message(int tracer_pid, const std::string& tracer_name) {
  const std::string line = "ptrace refused: it is already traced by process " + std::to_string(tracer_pid);
  if (tracer_name == "memtrace") return line + " (memtrace, loading its tracer): try again once it is done";
  if (tracer_name.empty()) return line + ": detach that one first";
  return line + " (" + tracer_name + "): detach that one first";  // the CLI's line is made terminal-safe
}

bool read_target_process(int pid, TargetProcess* out) {
  if (pid <= 0) return false;
  const std::string dir = "/proc/" + std::to_string(pid);
  bool ok = false;
  const std::string status = slurp(dir + "/status", &ok);
  if (!ok || status.empty()) return false;
  const std::string state = status_field(status, "State");
  if (state.find('Z') != std::string::npos || state.find('X') != std::string::npos) return false;
  TargetProcess t;
  t.pid = pid;
  t.tgid = std::atoi(status_field(status, "Tgid").c_str());
  parse_ids(status_field(status, "Uid"), t.uid);
  parse_ids(status_field(status, "Gid"), t.gid);
  t.tracer_pid = std::atoi(status_field(status, "TracerPid").c_str());
  // A process that is not dumpable (set-uid, prctl(PR_SET_DUMPABLE, 0)) has its /proc files given to root.
  struct stat proc_dir {};
  if (stat(dir.c_str(), &proc_dir) == 0) t.dumpable = proc_dir.st_uid == t.uid[0] || t.uid[0] == 0;
  const std::string maps = slurp(dir + "/maps", &ok);
  t.cuda_loaded = maps_file(maps, "libcuda.so");
  t.tracer_loaded = maps_file(maps, "libmemtrace.so");
  // Unreadable (another user's process): taken as ours, the owner check says no anyway.
  const std::string ours = link_target("/proc/self/ns/mnt"), theirs = link_target(dir + "/ns/mnt");
  t.other_mount_namespace = !ours.empty() && !theirs.empty() && ours != theirs;
  const std::string environ = slurp(dir + "/environ", &t.environ_readable);
  t.runtime_dir = environ_value(environ, "XDG_RUNTIME_DIR");
  *out = t;
  return true;
}

Privileges privileges_of_this_process() {
  Privileges who;
  who.uid = getuid();
  bool ok = false;
  const std::string caps = status_field(slurp("/proc/self/status", &ok), "CapEff");
  const unsigned long long effective = std::strtoull(caps.c_str(), nullptr, 16);
  who.cap_sys_ptrace = (effective >> 19) & 1;  // CAP_SYS_PTRACE is capability 19
  return who;
}

int yama_ptrace_scope() {
  bool ok = false;
  const std::string text = slurp("/proc/sys/kernel/yama/ptrace_scope", &ok);
  return ok && !text.empty() ? std::atoi(text.c_str()) : -1;
}

InjectResult check_ptrace_allowed(const TargetProcess& target, const Privileges& who, int yama_scope) {
  if (target.uid[0] != target.uid[1] || target.uid[0] != target.uid[2])
    return {InjectError::kSetuid, uid_triple("uid", target.uid)};
  if (target.gid[0] != target.gid[1] || target.gid[0] != target.gid[2])
    return {InjectError::kSetuid, uid_triple("gid", target.gid)};
  if (!target.dumpable) return {InjectError::kSetuid, "it is not dumpable"};
  if (target.uid[0] != who.uid && !who.cap_sys_ptrace)
    return {InjectError::kNotOwner,
            "uid " + std::to_string(target.uid[0]) + "; you are uid " + std::to_string(who.uid)};
  if (yama_scope == 3 || (yama_scope == 2 && !who.cap_sys_ptrace))
    return {InjectError::kYamaScope, std::to_string(yama_scope)};
  return {};
}

InjectResult check_attachable(const TargetProcess& target, const Privileges& who, int yama_scope) {
  InjectResult allowed = check_ptrace_allowed(target, who, yama_scope);
  if (allowed.error != InjectError::kNone) return allowed;
  if (!target.cuda_loaded) return {InjectError::kNoCuda, {}};
  return {};
}

std::string thread_refusal(const TargetProcess& target) {
  if (target.tgid <= 0 || target.tgid == target.pid) return {};
  return std::to_string(target.pid) + " is a thread of process " + std::to_string(target.tgid) +
         ", not a process: give " + std::to_string(target.tgid);
}

std::string namespace_refusal(const TargetProcess& target) {
  if (!target.other_mount_namespace) return {};
  return "process " + std::to_string(target.pid) +
         " runs in another mount namespace (a container): run memtrace inside it (docker exec, kubectl exec)";
}

std::string yama_message(int scope) {
  switch (scope) {
    case 1:
      return "the kernel's Yama ptrace_scope is 1 (a process may trace only its own descendants): run memtrace as "
             "root, or have the job allow it with prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), or set "
             "/proc/sys/kernel/yama/ptrace_scope to 0";
    case 2:
      return "the kernel's Yama ptrace_scope is 2 (only root may trace): run memtrace as root, or with "
             "CAP_SYS_PTRACE (a container: --cap-add=SYS_PTRACE)";
    case 3:
      return "the kernel's Yama ptrace_scope is 3 (no process may be traced until reboot): start the job with "
             "LD_PRELOAD=libmemtrace.so MEMTRACE_START=dormant instead";
    default: return "the kernel's Yama ptrace_scope is " + std::to_string(scope) + " and forbids it";
  }
}

}  // namespace memtrace
