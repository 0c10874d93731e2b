// Fatal signals, _exit() and exec*(): the ways a process ends (or stops being itself) without running
// atexit handlers. Each writes what is buffered and a TraceEnd saying which it was, then does exactly what
// the program asked for.
//
// Signals and chaining. Our handler is installed when tracing starts, for every signal of kEndingSignals.
// A program may install its own handler before that (we keep it and call it after flushing) or after (it
// calls sigaction() or signal(), which we interpose: the kernel keeps our handler, the program's goes into
// our table and is what the program reads back). Either way the program's handler runs, and with no handler
// the default action runs, so the process dies by the same signal, with the same core-dump behaviour, as it
// would untraced. A signal the program ignores (SIG_IGN) is left to the kernel, with nothing of ours in front.
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "attach/control_server.h"
#include "hooks/export.h"
#include "hooks/process_hooks.h"
#include "record/lifecycle.h"
#include "record/tls.h"

namespace memtrace {

// The crash signal whose program handler this thread is running (0 = none): an _exit() from inside that
// handler still ends the trace as killed by the signal.
MEMTRACE_TLS int t_handling_signal;
// Any signal whose program handler this thread is running (0 = none): an _exit() from inside it ends the trace
// with what is safe in a handler only (bounded waits for our locks, no writer thread to join, no device
// sample), since the handler may have interrupted this thread inside the recorder or inside malloc.
MEMTRACE_TLS int t_in_program_handler;

namespace {

// The signals that end a job without atexit handlers, so without us the last flush interval is lost.
// Crash signals (`fault`: the kernel also sends them for a faulting instruction, which re-executes when the
// handler returns): SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL. Signals that jobs are ended by from outside or
// by the kernel, whose default action terminates (SIGQUIT, SIGXCPU, SIGXFSZ also dump core): SIGTERM
// (timeout, Slurm, Kubernetes, torchrun), SIGINT (Ctrl-C; CPython re-raises it after an uncaught
// KeyboardInterrupt), SIGHUP (the terminal or the ssh session went away), SIGQUIT (Ctrl-\), SIGPIPE (the
// reader of stdout went away), SIGXCPU and SIGXFSZ (RLIMIT_CPU, RLIMIT_FSIZE: batch systems), SIGALRM
// (alarm() as a watchdog), SIGUSR1 and SIGUSR2 (terminate by default; Slurm's --signal sends one before
// the time limit). Not here: SIGKILL and SIGSTOP (cannot be caught), the signals whose default is to
// ignore or stop (SIGCHLD, SIGWINCH, SIGTSTP, ...: they never end the process), the real-time signals
// (glibc and other runtimes use some internally).
struct EndingSignal {
  int number;
  bool fault;
};
constexpr EndingSignal kEndingSignals[] = {
    {SIGSEGV, true},  {SIGBUS, true},   {SIGABRT, true},  {SIGFPE, true},   {SIGILL, true},
    {SIGTERM, false}, {SIGINT, false},  {SIGHUP, false},  {SIGQUIT, false}, {SIGPIPE, false},
    {SIGXCPU, false}, {SIGXFSZ, false}, {SIGALRM, false}, {SIGUSR1, false}, {SIGUSR2, false},
};

const EndingSignal* ending_signal(int sig) {
  for (const EndingSignal& s : kEndingSignals)
    if (s.number == sig) return &s;
  return nullptr;
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
// tracer's start (installing the signal handlers) on whichever thread makes the first CUDA call, and run dlsym under
// the static's guard: a fork() at that moment would leave the child's own start waiting on the guard forever.
__attribute__((constructor)) void resolve_real_sigaction() { real_sigaction(); }

// Per ending signal, once tracing has started (`managed`): whether our handler is in the kernel, and the action
// the program believes is installed. Managed but not installed: the program ignores the signal, and the kernel
// holds its SIG_IGN.
struct Chained {
  std::atomic<bool> managed{false};
  std::atomic<bool> ours_installed{false};
  struct sigaction program_action = {};  // the program's own action, or what was there before ours
};
// constinit: set before any code runs, as a hook can run in another library's constructor before ours
// (device_usage.cc's g_devices says more).
constinit Chained g_chained[NSIG];

// sa_handler and sa_sigaction share their storage, and the kernel reads SIG_DFL and SIG_IGN from it whatever
// SA_SIGINFO says.
bool is_ignore(const struct sigaction& action) { return action.sa_handler == SIG_IGN; }

bool has_handler(const struct sigaction& action) {
  return action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN;
}

void ending_signal_handler(int sig, siginfo_t* info, void* context);

// Puts our handler in the kernel in front of `program`. While ours is there the kernel applies our sa_flags
// and sa_mask, not the program's, so they mirror the program's: SA_RESTART decides whether a blocking call
// (read, wait, ...) interrupted by the signal fails with EINTR or restarts; sa_mask and SA_NODEFER are the
// signals blocked while the program's handler runs; SA_ONSTACK whether it runs on the alternate stack.
// SA_RESETHAND is emulated in our handler (the kernel would remove ours with it). With no program handler
// (SIG_DFL) the process dies by the signal, so no call is interrupted: SA_ONSTACK then lets a stack overflow
// still end the trace where the program has an alternate stack. Async-signal-safe (sigaction is).
int install_ours(int sig, const struct sigaction& program) {
  struct sigaction ours;
  memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = ending_signal_handler;
  if (has_handler(program)) {
    ours.sa_flags = SA_SIGINFO | (program.sa_flags & (SA_RESTART | SA_NODEFER | SA_ONSTACK));
    ours.sa_mask = program.sa_mask;
  } else {
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
  }
  return real_sigaction()(sig, &ours, nullptr);
}

// abort() raises SIGABRT and, if a handler returns, resets the action to SIG_DFL through glibc's internal
// sigaction (which we never see) and raises again: our handler is not entered a second time.
bool raised_by_abort(int sig, const siginfo_t* info) {
  return sig == SIGABRT && info && info->si_code <= 0 && info->si_pid == getpid();
}

// Runs the program's handler; the program may live on (recover with siglongjmp, or, like CPython's SIGINT
// handler, just note the signal), so the trace does not end here. If the handler hands the signal on to the
// default action instead, we are entered again, without a handler, and end it then.
//
// Before a crash handler, what is buffered is written: the process is in a broken state, and the handler may
// crash in turn or end it in a way we do not see. Before the handler of any other signal, nothing is: the
// process is sound, the writer thread keeps flushing while it lives, and every way out of the handler that ends
// it (exit, _exit, exec, the signal again with SIG_DFL) is hooked. And those signals can come often (SIGALRM
// from an interval timer, SIGUSR1/SIGUSR2 or SIGXCPU as a runtime's thread-to-thread signals): a flush at each
// would compress and write a chunk on the job's thread, or wait up to a second for a lock held by a thread
// that the runtime has suspended.
void chain_to_program(int sig, siginfo_t* info, void* context, struct sigaction program, int saved_errno) {
  bool crash = ending_signal(sig)->fault;
  if (raised_by_abort(sig, info)) recorder_finish_from_signal(sig, /*process_dies=*/false);
  else if (crash) recorder_flush_from_signal();
  if (program.sa_flags & SA_RESETHAND) {
    g_chained[sig].program_action.sa_handler = SIG_DFL;
    g_chained[sig].program_action.sa_flags = 0;
  }
  errno = saved_errno;
  // An _exit() from a crash handler ends a crash; from a SIGTERM handler it is the program's own clean exit.
  int outer = t_handling_signal, outer_any = t_in_program_handler;
  if (crash) t_handling_signal = sig;
  t_in_program_handler = sig;
  if (program.sa_flags & SA_SIGINFO) program.sa_sigaction(sig, info, context);
  else program.sa_handler(sig);
  t_handling_signal = outer;
  t_in_program_handler = outer_any;
}

void ending_signal_handler(int sig, siginfo_t* info, void* context) {
  int saved_errno = errno;
  struct sigaction program = g_chained[sig].program_action;
  // The program set SIG_IGN and our sigaction() has not yet put it into the kernel: ignored.
  if (is_ignore(program)) return;
  if (has_handler(program)) {
    chain_to_program(sig, info, context, program, saved_errno);
    return;
  }
  control_server_remove_endpoint();
  recorder_finish_from_signal(sig, /*process_dies=*/true);
  // No handler of the program's: give the signal its disposition back and let it act. A fault re-executes
  // the faulting instruction on return; a raised or sent signal is raised again (it stays pending until
  // this handler returns, since the signal is blocked while it runs). Only crash signals come from faults:
  // the others are sent even when si_code is positive (SI_KERNEL: the terminal's Ctrl-C, RLIMIT_CPU, alarm()).
  g_chained[sig].ours_installed.store(false);
  real_sigaction()(sig, &program, nullptr);
  if (!ending_signal(sig)->fault || info == nullptr || info->si_code <= 0) raise(sig);
  errno = saved_errno;
}

// What our sigaction() does for a managed signal. `act` null: a query, answered from our table while ours is
// in front. SIG_IGN goes into the kernel as it is (ours leaves); anything else goes into our table with ours
// in front, its flags mirrored (install_ours).
int managed_sigaction(int sig, const struct sigaction* act, struct sigaction* oldact) {
  Chained& chained = g_chained[sig];
  struct sigaction old;
  if (chained.ours_installed.load()) {
    old = chained.program_action;
  } else if (real_sigaction()(sig, nullptr, &old) != 0) {
    return -1;
  }
  if (act) {
    // The table first: a signal arriving in between then finds the new action in it.
    chained.program_action = *act;
    if (is_ignore(*act)) {
      if (real_sigaction()(sig, act, nullptr) != 0) return -1;
      chained.ours_installed.store(false);
    } else {
      if (install_ours(sig, *act) != 0) return -1;
      chained.ours_installed.store(true);
    }
  }
  if (oldact) *oldact = old;
  return 0;
}

}  // namespace

void ending_signals_install() {
  for (const EndingSignal& s : kEndingSignals) {
    Chained& chained = g_chained[s.number];
    if (chained.managed.load()) continue;  // a second start (a forked child's, after a failed exec) keeps its table
    struct sigaction previous;
    if (real_sigaction()(s.number, nullptr, &previous) != 0) continue;
    chained.program_action = previous;
    chained.managed.store(true);
    // Ignored (nohup's SIGHUP, CPython's SIGPIPE): a handler of ours would make blocking calls fail with EINTR
    // where they did not, so the kernel keeps SIG_IGN until the program installs something else.
    if (is_ignore(previous)) continue;
    if (install_ours(s.number, previous) == 0) chained.ours_installed.store(true);
  }
}

}  // namespace memtrace

using memtrace::g_chained;

// ---- signal handler installation ---------------------------------------------------------------------------

MEMTRACE_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* oldact) noexcept {
  auto real = memtrace::real_sigaction();
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  if (sig > 0 && sig < NSIG && g_chained[sig].managed.load()) return memtrace::managed_sigaction(sig, act, oldact);
  return real(sig, act, oldact);
}

namespace memtrace {
namespace {
// Signals named by siginterrupt(sig, 1): glibc's signal() installs their handlers without SA_RESTART (its own
// _sigintr set), so a blocking call they interrupt fails with EINTR; ours must install them the same way.
constinit std::atomic<bool> g_interrupts[NSIG];
}  // namespace
}  // namespace memtrace

// glibc's siginterrupt() edits the kernel's action through its internal sigaction, which for a signal of ours is
// our handler's entry, not the program's action in our table: for those it goes through our sigaction() instead.
MEMTRACE_EXPORT int siginterrupt(int sig, int flag) noexcept {
  if (sig > 0 && sig < NSIG) memtrace::g_interrupts[sig].store(flag != 0);
  if (sig > 0 && sig < NSIG && g_chained[sig].managed.load()) {
    struct sigaction action;
    if (sigaction(sig, nullptr, &action) != 0) return -1;
    if (flag) action.sa_flags &= ~SA_RESTART;
    else action.sa_flags |= SA_RESTART;
    return sigaction(sig, &action, nullptr);
  }
  using SiginterruptFn = int (*)(int, int);
  auto real = memtrace::next_fn<SiginterruptFn>("siginterrupt");
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  return real(sig, flag);
}

// glibc's signal() installs through its internal sigaction, which our sigaction() never sees.
MEMTRACE_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept {
  if (sig > 0 && sig < NSIG && g_chained[sig].managed.load()) {
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    // glibc's signal() has BSD semantics (SA_RESTART) but for a signal named by siginterrupt(sig, 1)
    act.sa_flags = memtrace::g_interrupts[sig].load() ? 0 : SA_RESTART;
    struct sigaction old;
    if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
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
  memtrace::control_server_remove_endpoint();  // a dormant or attached process's socket goes with it
  if (memtrace::t_handling_signal)
    memtrace::recorder_finish_from_signal(memtrace::t_handling_signal, /*process_dies=*/true);
  else if (memtrace::t_in_program_handler)  // e.g. a SIGTERM handler's _exit: the program's own exit
    memtrace::recorder_finish_from_signal(0, /*process_dies=*/true, memtrace::EndHow::kUnderscoreExit);
  else memtrace::recorder_finish(memtrace::EndHow::kUnderscoreExit);
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

namespace {
// Ends the trace, calls `real` (the next definition of the exec function, null when there is none) with
// `args`, and resumes tracing if it returns (the exec failed), with the exec's errno kept for the program.
template <typename Fn, typename... Args>
int exec_ending_trace(Fn real, Args... args) {
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  // The endpoint is this image's: the new one (preloaded again) makes its own at its first event.
  memtrace::control_server_remove_endpoint();
  memtrace::recorder_finish(memtrace::EndHow::kExec);
  int r = real(args...);
  int saved_errno = errno;
  memtrace::recorder_resume_after_exec_failure();
  errno = saved_errno;
  return r;
}
}  // namespace

MEMTRACE_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  using Fn = int (*)(const char*, char* const[], char* const[]);
  static Fn real = memtrace::next_fn<Fn>("execve");
  return exec_ending_trace(real, path, argv, envp);
}

MEMTRACE_EXPORT int execv(const char* path, char* const argv[]) noexcept {
  using Fn = int (*)(const char*, char* const[]);
  static Fn real = memtrace::next_fn<Fn>("execv");
  return exec_ending_trace(real, path, argv);
}

MEMTRACE_EXPORT int execvp(const char* file, char* const argv[]) noexcept {
  using Fn = int (*)(const char*, char* const[]);
  static Fn real = memtrace::next_fn<Fn>("execvp");
  return exec_ending_trace(real, file, argv);
}

MEMTRACE_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  using Fn = int (*)(const char*, char* const[], char* const[]);
  static Fn real = memtrace::next_fn<Fn>("execvpe");
  return exec_ending_trace(real, file, argv, envp);
}

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
