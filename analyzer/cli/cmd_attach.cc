// `memtrace attach [-o PATTERN] PID`, `memtrace detach PID`, `memtrace snapshot [-o PATTERN] PID`: control of the
// tracer inside a running process through its endpoint (proto/control_protocol.h). Where PID has no tracer, attach
// and snapshot load one (attach/injector.h) after the checks of attach/target_process.h. Every failure is one line,
// "memtrace: cannot attach to PID: ..." (detach from, snapshot), and exit status 1; the target is never left
// stopped or traced.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "attach/control_client.h"
#include "attach/injector.h"
#include "attach/target_process.h"
#include "cli/commands.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

constexpr int kExitFailed = 1;
constexpr int kSafePointTimeoutMs = 5000;    // for the injector to find the thread at a safe point
constexpr int kEndpointWaitMs = 5000;        // for a freshly loaded tracer's endpoint to answer
constexpr int kStatusTimeoutMs = 2000;       // a status request
constexpr int kRecordingTimeoutMs = 120000;  // attach, detach, snapshot: the live set listed, the file flushed

// The three commands, and how each says it failed.
enum class Action { kAttach, kDetach, kSnapshot };

const char* failure_prefix(Action action) {
  switch (action) {
    case Action::kAttach: return "cannot attach to ";
    case Action::kDetach: return "cannot detach from ";
    case Action::kSnapshot: return "cannot snapshot ";
  }
  return "";
}

struct ControlArgs {
  std::string pid;
  std::string output;  // -o PATTERN
  bool output_given = false;
};

int fail(Action action, int pid, const std::string& why) {
  std::cerr << "memtrace: " << failure_prefix(action) << pid << ": " << terminal_safe(why) << '\n';
  return kExitFailed;
}

int parse_pid(const std::string& command, const std::string& text) {
  if (text.empty()) throw UsageError(command + " needs the PID of a running process");
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || value > 99999999) throw UsageError("PID must be a process id, not '" + text + "'");
    value = value * 10 + (c - '0');
  }
  if (value <= 0) throw UsageError("PID must be a process id, not '" + text + "'");
  return int(value);
}

// -o's PATTERN as the tracer will be given it: absolute (the process's working directory is not ours), on one line.
std::string checked_pattern(const ControlArgs& args) {
  if (!args.output_given) return {};
  if (args.output.empty()) throw UsageError("-o needs a file name pattern");
  if (args.output.find('\n') != std::string::npos) throw UsageError("-o's pattern holds a line break");
  if (args.output[0] == '/') return args.output;
  return (std::filesystem::current_path() / args.output).string();
}

// Loads libmemtrace.so into `target` after the checks, and waits for its endpoint. Empty, or why not.
std::string load_tracer(const TargetProcess& target, const ControlEndpoint& endpoint) {
  if (target.tracer_loaded)
    return "process " + std::to_string(target.pid) +
           " has memtrace's tracer loaded but no endpoint open: a preloaded tracer opens it at the process's first "
           "CUDA call with MEMTRACE_START=dormant";
  InjectResult allowed = check_attachable(target, privileges_of_this_process(), yama_ptrace_scope());
  if (allowed.error != InjectError::kNone) return inject_error_message(target.pid, allowed);
  const std::filesystem::path library = tracer_library_path();
  std::error_code error;
  if (library.empty() || !std::filesystem::exists(library, error))
    return (library.empty() ? std::string("libmemtrace.so") : library.string()) +
           ": tracer library not found next to the memtrace executable";
  std::string why;
  if (!write_inject_request(endpoint, &why)) return why;
  InjectResult injected = inject_library(target.pid, library.string(), kSafePointTimeoutMs);
  if (injected.error != InjectError::kNone) {
    std::filesystem::remove(endpoint.inject_path, error);
    return inject_error_message(target.pid, injected);
  }
  for (int waited_ms = 0; waited_ms < kEndpointWaitMs; waited_ms += 50) {
    const ControlReply status = control_request(endpoint, "status", kStatusTimeoutMs);
    if (status.status == ControlStatus::kOk) return {};
    if (status.status == ControlStatus::kError) return status.text;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::filesystem::remove(endpoint.inject_path, error);
  return library.string() + " was loaded but its endpoint " + endpoint.socket_path + " did not answer within " +
         std::to_string(kEndpointWaitMs / 1000) + " s";
}

int control(Action action, const std::string& command, const ControlArgs& args) {
  const int pid = parse_pid(command, args.pid);
  const std::string pattern = action == Action::kDetach ? std::string() : checked_pattern(args);
  TargetProcess target;
  if (!read_target_process(pid, &target))
    return fail(action, pid, inject_error_message(pid, {InjectError::kNoSuchProcess, {}}));
  if (std::string refusal = thread_refusal(target); !refusal.empty()) return fail(action, pid, refusal);
  if (std::string refusal = namespace_refusal(target); !refusal.empty()) return fail(action, pid, refusal);
  ControlEndpoint endpoint;
  std::string why;
  if (!control_endpoint_of(target, &endpoint, &why)) return fail(action, pid, why);
  const ControlReply status = control_request(endpoint, "status", kStatusTimeoutMs);
  if (status.status == ControlStatus::kError) return fail(action, pid, status.text);
  if (status.status == ControlStatus::kNoTracer) {
    if (action == Action::kDetach) return fail(action, pid, no_tracer_message(pid, target.cuda_loaded));
    InjectLock lock;  // another memtrace command loading a tracer into `pid` finishes first
    if (!lock.acquire(endpoint, &why)) return fail(action, pid, why);
    const ControlReply again = control_request(endpoint, "status", kStatusTimeoutMs);
    if (again.status == ControlStatus::kError) return fail(action, pid, again.text);
    if (again.status == ControlStatus::kNoTracer)
      if (std::string loaded = load_tracer(target, endpoint); !loaded.empty()) return fail(action, pid, loaded);
  }
  const std::string request = action == Action::kAttach   ? "attach " + pattern
                              : action == Action::kDetach ? std::string("detach")
                                                          : "snapshot " + pattern;
  const ControlReply reply = control_request(endpoint, request, kRecordingTimeoutMs);
  if (reply.status == ControlStatus::kNoTracer) return fail(action, pid, no_tracer_message(pid, target.cuda_loaded));
  if (reply.status != ControlStatus::kOk) return fail(action, pid, reply.text);
  const std::string path = terminal_safe(reply.text);
  switch (action) {
    case Action::kAttach: std::cout << "memtrace: attached to " << pid << ", tracing to " << path << '\n'; break;
    case Action::kDetach: std::cout << "memtrace: detached from " << pid << ", wrote " << path << '\n'; break;
    case Action::kSnapshot: std::cout << "memtrace: wrote " << path << '\n'; break;
  }
  return kExitOk;
}

void add_pid(CLI::App* command, ControlArgs* args) {
  command->add_option("PID", args->pid, "the running process")->type_name("");
}

void add_pattern(CLI::App* command, ControlArgs* args) {
  command
      ->add_option_function<std::string>(
          "-o,--output",
          [args](const std::string& value) {
            args->output = value;
            args->output_given = true;
          },
          "the trace's file (%p: the process id, %h: the host, %r: the rank, %%: a %); default: the process's "
          "MEMTRACE_OUTPUT, else memtrace-<host>-<pid>.mtrace in its working directory")
      ->type_name("PATTERN")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

}  // namespace

RunCommand add_attach(CLI::App& memtrace) {
  auto args = std::make_shared<ControlArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "attach",
      "start recording in running process PID: through its tracer's endpoint (MEMTRACE_START=dormant), else "
      "after loading the tracer into it (ptrace; docs/commands/attach.md)");
  add_pattern(command, args.get());
  add_pid(command, args.get());
  return [args] { return control(Action::kAttach, "attach", *args); };
}

RunCommand add_detach(CLI::App& memtrace) {
  auto args = std::make_shared<ControlArgs>();
  CLI::App* command =
      memtrace.add_subcommand("detach", "stop recording in process PID and complete its trace; the job runs on");
  add_pid(command, args.get());
  return [args] { return control(Action::kDetach, "detach", *args); };
}

RunCommand add_snapshot(CLI::App& memtrace) {
  auto args = std::make_shared<ControlArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "snapshot",
      "write what process PID has allocated now as a trace of its own (loading the tracer first where "
      "it has none); the process stays as it was");
  add_pattern(command, args.get());
  add_pid(command, args.get());
  return [args] { return control(Action::kSnapshot, "snapshot", *args); };
}

}  // namespace memtrace
