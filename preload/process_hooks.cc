// Fatal signals, _exit() and exec*(): the three ways a process ends (or stops being itself) without running
// atexit handlers. Each writes what is buffered and a TraceEnd saying which it was, then does exactly what
// the program asked for.
//
// Fatal signals and chaining. Our handler is installed when tracing starts. A program may install its own
// handler before that (we keep it and call it after flushing) or after (it calls sigaction(), which we
// interpose: the kernel keeps our handler, the program's goes into our table and is what the program reads
// back). Either way the program's handler runs, and with no handler the default action runs, so the process
// dies by the same signal, with the same core-dump behaviour, as it would untraced.
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "process_hooks.h"
#include "recorder.h"
#include "tls.h"

#define MEMTRACE_EXPORT __attribute__((visibility("default")))

namespace memtrace {

// The fatal signal whose program handler this thread is running (0 = none): an _exit() from inside that
// handler still ends the trace as killed by the signal.
MEMTRACE_TLS int t_handling_signal;

namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};

bool is_crash_signal(int sig) {
  for (int s : kCrashSignals)
    if (s == sig) return true;
  return false;
}

template <typename Fn>
Fn next_fn(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
SigactionFn real_sigaction() {
  static SigactionFn fn = next_fn<SigactionFn>("sigaction");
  return fn;
}
// Resolved when the library loads, while the process has one thread. Lazily, the first call would come from the
// tracer's start (installing the crash handlers) on whichever thread makes the first CUDA call, and run dlsym under
// the static's guard: a fork() at that moment would leave the child's own start waiting on the guard forever.
__attribute__((constructor)) void resolve_real_sigaction() { real_sigaction(); }

// Per crash signal: whether our handler is in the kernel, and the action the program believes is installed.
struct Chained {
  std::atomic<bool> ours_installed{false};
  struct sigaction program_action = {};  // the program's own handler, or what was there before ours
};
// constinit: set before any code runs, as a hook can run in another library's constructor before ours
// (device_usage.cc's g_devices says more).
constinit Chained g_chained[NSIG];


// abort() raises SIGABRT and, if a handler returns, resets the action to SIG_DFL through glibc's internal
// sigaction (which we never see) and raises again: our handler is not entered a second time.
bool raised_by_abort(int sig, const siginfo_t* info) {
  return sig == SIGABRT && info && info->si_code <= 0 && info->si_pid == getpid();
}

void crash_handler(int sig, siginfo_t* info, void* context) {
  int saved_errno = errno;
  struct sigaction program = g_chained[sig].program_action;
  bool has_handler = (program.sa_flags & SA_SIGINFO)
                         ? program.sa_sigaction != nullptr
                         : program.sa_handler != SIG_DFL && program.sa_handler != SIG_IGN;
  if (has_handler) {
    // The program may recover (siglongjmp) and live on: write what we have but do not end the trace yet.
    // If its handler hands the signal on to the default action instead, we are entered again, without
    // a handler, and end it then.
    if (raised_by_abort(sig, info))
      recorder_finish_from_signal(sig, /*process_dies=*/false);
    else
      recorder_flush_from_signal();
    if (program.sa_flags & SA_RESETHAND) {
      g_chained[sig].program_action.sa_handler = SIG_DFL;
      g_chained[sig].program_action.sa_flags = 0;
    }
    errno = saved_errno;
    int outer = t_handling_signal;
    t_handling_signal = sig;
    if (program.sa_flags & SA_SIGINFO)
      program.sa_sigaction(sig, info, context);
    else
      program.sa_handler(sig);
    t_handling_signal = outer;
    return;
  }
  recorder_finish_from_signal(sig, /*process_dies=*/true);
  // No handler of the program's: give the signal its disposition back and let it act. A fault re-executes
  // the faulting instruction on return; a raised or sent signal is raised again (it stays pending until
  // this handler returns, since the signal is blocked while it runs).
  g_chained[sig].ours_installed.store(false);
  real_sigaction()(sig, &program, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);
  errno = saved_errno;
}

}  // namespace

void crash_signals_install() {
  for (int sig : kCrashSignals) {
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = crash_handler;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    struct sigaction previous;
    if (real_sigaction()(sig, &ours, &previous) != 0) continue;
    g_chained[sig].program_action = previous;
    g_chained[sig].ours_installed.store(true);
  }
}

}  // namespace memtrace

using memtrace::g_chained;
using memtrace::is_crash_signal;



// ---- signal handler installation ---------------------------------------------------------------------------

MEMTRACE_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* oldact) noexcept {
  if (sig > 0 && sig < NSIG && is_crash_signal(sig) && g_chained[sig].ours_installed.load()) {
    if (oldact) *oldact = g_chained[sig].program_action;
    if (act) g_chained[sig].program_action = *act;
    return 0;
  }
  auto real = memtrace::real_sigaction();
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  return real(sig, act, oldact);
}

// glibc's signal() installs through its internal sigaction, which our sigaction() never sees.
MEMTRACE_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept {
  if (sig > 0 && sig < NSIG && is_crash_signal(sig) && g_chained[sig].ours_installed.load()) {
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;  // glibc's signal() has BSD semantics
    struct sigaction old;
    sigaction(sig, &act, &old);
    if (old.sa_flags & SA_SIGINFO) return reinterpret_cast<sighandler_t>(reinterpret_cast<void*>(old.sa_sigaction));
    return old.sa_handler;
  }
  using SignalFn = sighandler_t (*)(int, sighandler_t);
  static SignalFn real = memtrace::next_fn<SignalFn>("signal");
  if (!real) {
    errno = ENOSYS;
    return SIG_ERR;
  }
  return real(sig, handler);
}

// ---- _exit ---------------------------------------------------------------------------------------------------
// os._exit(), DataLoader workers and many launchers leave this way: no atexit handler, no destructor.

[[noreturn]] void exit_now(const char* name, int status) {
  using ExitFn = void (*)(int);
  ExitFn real = memtrace::next_fn<ExitFn>(name);
  if (real) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

void finish_for_exit() {
  if (memtrace::t_handling_signal)
    memtrace::recorder_finish_from_signal(memtrace::t_handling_signal, /*process_dies=*/true);
  else
    memtrace::recorder_finish(memtrace::EndHow::kUnderscoreExit);
}

MEMTRACE_EXPORT void _exit(int status) {
  finish_for_exit();
  exit_now("_exit", status);
}

MEMTRACE_EXPORT void _Exit(int status) {
  finish_for_exit();
  exit_now("_Exit", status);
}

// ---- exec ----------------------------------------------------------------------------------------------------
// The new image starts its own trace (LD_PRELOAD is inherited); this one ends here. If the exec fails, the
// program carries on and so does its trace.

#define MEMTRACE_EXEC_HOOK(name, params, args)                      \
  MEMTRACE_EXPORT int name params noexcept {                        \
    using Fn = int(*) params;                                        \
    static Fn real = memtrace::next_fn<Fn>(#name);                   \
    if (!real) {                                                     \
      errno = ENOSYS;                                                \
      return -1;                                                     \
    }                                                                \
    memtrace::recorder_finish(memtrace::EndHow::kExec);              \
    int r = real args;                                               \
    int saved_errno = errno;                                         \
    memtrace::recorder_resume_after_exec_failure();                  \
    errno = saved_errno;                                             \
    return r;                                                        \
  }

MEMTRACE_EXEC_HOOK(execve, (const char* path, char* const argv[], char* const envp[]), (path, argv, envp))
MEMTRACE_EXEC_HOOK(execv, (const char* path, char* const argv[]), (path, argv))
MEMTRACE_EXEC_HOOK(execvp, (const char* file, char* const argv[]), (file, argv))
MEMTRACE_EXEC_HOOK(execvpe, (const char* file, char* const argv[], char* const envp[]), (file, argv, envp))

// execl, execlp and execle take their arguments as a list; glibc runs them through its internal execve,
// which never reaches the hooks above. Collected into an array (bounded: a longer list fails with E2BIG,
// as the kernel would) and passed to the hooked array forms.
namespace {
constexpr int kMaxExecArgs = 4096;

bool collect_args(const char* arg0, va_list* ap, char** argv) {
  int n = 0;
  argv[n++] = const_cast<char*>(arg0);
  while (argv[n - 1] != nullptr) {
    if (n == kMaxExecArgs) {
      errno = E2BIG;
      return false;
    }
    argv[n++] = va_arg(*ap, char*);
  }
  return true;
}
}  // namespace

MEMTRACE_EXPORT int execl(const char* path, const char* arg, ...) noexcept {
  char* argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  bool ok = collect_args(arg, &ap, argv);
  va_end(ap);
  return ok ? execv(path, argv) : -1;
}

MEMTRACE_EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
  char* argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  bool ok = collect_args(arg, &ap, argv);
  va_end(ap);
  return ok ? execvp(file, argv) : -1;
}

MEMTRACE_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
  char* argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  bool ok = collect_args(arg, &ap, argv);
  char* const* envp = ok ? va_arg(ap, char* const*) : nullptr;
  va_end(ap);
  return ok ? execve(path, argv, envp) : -1;
}
