// The ptrace injector (attach/injector.h). In order:
//   1. the process's dlopen (and dlerror): the C library's file from /proc/PID/maps, its dynamic symbol table read
//      with libelf through /proc/PID/root (a container's files), plus the load bias;
//   2. a thread at a safe point (find_safe_point), the main thread first, then the others of /proc/PID/task in turn:
//      each is seized (PTRACE_SEIZE is per thread) and stopped with PTRACE_INTERRUPT. It is at a safe point when
//      that stop finds it blocked inside a safe system call (at_interrupted_safe_syscall: a futex wait, a ppoll, an
//      epoll_wait...), else it runs from system call to system call (PTRACE_SYSCALL) until the exit of a safe one
//      (at_safe_syscall_exit). Safe: a call that glibc's malloc and the dynamic loader never make while holding
//      their locks (safe_syscall). The main thread gets half the timeout when there are other threads (all of it
//      when alone), each other thread an equal share of what is left; a thread not chosen is detached at once,
//      as it was (a blocked call it was in is restarted by the kernel);
//   3. every register of the chosen thread saved (general, and the whole x87/SSE/AVX state, which dlopen's code
//      uses);
//   4. a call of dlopen(LIBRARY, RTLD_NOW) on the thread's own stack, below the red zone, returning to address 0:
//      the SIGSEGV there ends the call; on NULL a call of dlerror() the same way, for the message;
//   5. every register restored (orig_rax and rax too: an interrupted blocking call is then restarted by the kernel
//      as if we had not been there, which is what gdb's `call` in a blocked thread relies on), the signals that
//      arrived meanwhile sent again, PTRACE_DETACH.
// Every path out detaches (Tracee's destructor), and the signals that would kill memtrace are blocked while the
// thread runs our call: a tracer that died there would leave it returning to address 0.
#include "attach/injector.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "attach/target_process.h"

namespace memtrace {
namespace {

// Every step below is x86-64's (registers, the call); elsewhere inject_library says so in one line.
#if defined(__x86_64__)

// ---- 1. the process's dlopen ------------------------------------------------------------------------------------

// A library as mapped in the target: its path (in the target's mount namespace) and the address its file offset
// 0 is mapped at.
struct MappedLibrary {
  std::string path;
  uint64_t base = 0;
};

bool is_libc_name(const std::string& name) {
  return name == "libc.so.6" || (name.rfind("libc-", 0) == 0 && name.size() > 8 && name.ends_with(".so"));
}
bool is_libdl_name(const std::string& name) {
  return name == "libdl.so.2" || (name.rfind("libdl-", 0) == 0 && name.ends_with(".so"));
}

// The first library in /proc/PID/maps whose file name `matches`, at its offset-0 mapping. False when none.
bool find_mapped_library(int pid, bool (*matches)(const std::string&), MappedLibrary* out) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode, path;
    fields >> range >> perms >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    if (path.empty() || path[0] != '/' || std::strtoull(offset.c_str(), nullptr, 16) != 0) continue;
    if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
    if (!matches(path.substr(path.rfind('/') + 1))) continue;
    out->path = path;
    out->base = std::strtoull(range.c_str(), nullptr, 16);
    return true;
  }
  return false;
}

// The address of function `symbol` in `library` as loaded in process `pid`, 0 when the library does not define
// it. The default version wins where several versions of the name are exported (glibc's dlopen@@GLIBC_2.34 over
// dlopen@GLIBC_2.2.5). `why`: one line when the file cannot be read.
uint64_t function_address(int pid, const MappedLibrary& library, const char* symbol, std::string* why) {
  const std::string file = "/proc/" + std::to_string(pid) + "/root" + library.path;
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = library.path + ": " + std::strerror(errno);
    return 0;
  }
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  uint64_t address = 0, fallback = 0;
  int64_t bias = 0;
  bool have_bias = false;
  size_t segments = 0;
  if (elf && elf_getphdrnum(elf, &segments) == 0) {
    for (size_t i = 0; i < segments && !have_bias; ++i) {
      GElf_Phdr phdr;
      if (!gelf_getphdr(elf, int(i), &phdr) || phdr.p_type != PT_LOAD) continue;
      // The first PT_LOAD maps file offset p_offset at p_vaddr + bias, page-aligned as mmap needs.
      const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
      bias = int64_t(library.base) - int64_t((phdr.p_vaddr - phdr.p_offset) & ~(page - 1));
      have_bias = true;
    }
  }
  Elf_Scn* versym_section = nullptr;
  Elf_Scn* dynsym_section = nullptr;
  GElf_Shdr dynsym_header{};
  for (Elf_Scn* scn = elf ? elf_nextscn(elf, nullptr) : nullptr; scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    if (shdr.sh_type == SHT_DYNSYM) dynsym_section = scn, dynsym_header = shdr;
    if (shdr.sh_type == SHT_GNU_versym) versym_section = scn;
  }
  if (dynsym_section && have_bias) {
    Elf_Data* symbols = elf_getdata(dynsym_section, nullptr);
    Elf_Data* versions = versym_section ? elf_getdata(versym_section, nullptr) : nullptr;
    const size_t count = dynsym_header.sh_entsize ? dynsym_header.sh_size / dynsym_header.sh_entsize : 0;
    for (size_t i = 0; symbols && i < count; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(symbols, int(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
      const char* name = elf_strptr(elf, dynsym_header.sh_link, sym.st_name);
      if (!name || std::strcmp(name, symbol) != 0) continue;
      GElf_Versym version = 0;
      const bool hidden = versions && gelf_getversym(versions, int(i), &version) && (version & 0x8000);
      (hidden ? fallback : address) = uint64_t(bias + int64_t(sym.st_value));
    }
  } else if (!elf || !dynsym_section) {
    *why = library.path + ": no dynamic symbol table";
  }
  if (elf) elf_end(elf);
  close(fd);
  return address ? address : fallback;
}

// What the injection calls in the target.
struct LoaderFunctions {
  uint64_t dlopen = 0;
  uint64_t dlerror = 0;  // 0: none found (the failure is then said without dlerror's text)
};

// dlopen and dlerror from the target's libc (glibc >= 2.34 has them there), else from its libdl.so.2.
InjectResult find_loader_functions(int pid, LoaderFunctions* out) {
  MappedLibrary libc;
  std::string why;
  if (!find_mapped_library(pid, is_libc_name, &libc)) return {InjectError::kNoDlopen, "no libc.so.6 is mapped"};
  out->dlopen = function_address(pid, libc, "dlopen", &why);
  out->dlerror = function_address(pid, libc, "dlerror", &why);
  MappedLibrary libdl;
  if (!out->dlopen && find_mapped_library(pid, is_libdl_name, &libdl)) {
    out->dlopen = function_address(pid, libdl, "dlopen", &why);
    out->dlerror = function_address(pid, libdl, "dlerror", &why);
  }
  if (out->dlopen) return {};
  return {InjectError::kNoDlopen,
          why.empty() ? libc.path + " has no dlopen (a C library before glibc 2.34) and libdl.so.2 is not loaded"
                      : why};
}

// ---- 2. to 5. the ptrace part --------------------------------------------------------------------------------

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// How a wait for the tracee ended.
enum class Waited { kStopped, kGone, kTimeout };

// Waits for the next stop of `pid` until `deadline_ns` (CLOCK_MONOTONIC; -1: no deadline), polling: a blocking
// waitpid cannot time out, and SIGCHLD is the caller's to handle.
Waited wait_for_stop(int pid, int64_t deadline_ns, int* status) {
  for (;;) {
    const pid_t got = waitpid(pid, status, __WALL | WNOHANG);
    if (got == pid) return WIFSTOPPED(*status) ? Waited::kStopped : Waited::kGone;
    if (got < 0 && errno != EINTR) return Waited::kGone;
    if (deadline_ns >= 0 && now_ns() >= deadline_ns) return Waited::kTimeout;
    const timespec pause{0, 200 * 1000};
    nanosleep(&pause, nullptr);
  }
}

bool is_group_stop_signal(int signal) {
  return signal == SIGSTOP || signal == SIGTSTP || signal == SIGTTIN || signal == SIGTTOU;
}

// A system call that glibc's malloc and the dynamic loader do not make while they hold a lock: a thread returning
// from one holds neither, so dlopen (which takes the loader's lock and allocates) cannot wait on itself. mmap,
// munmap, brk, mprotect, madvise, openat, read, close and fstat are the ones they do make: never a safe point.
// restart_syscall continues an interrupted nanosleep, clock_nanosleep, futex wait or poll, all of them safe.
bool safe_syscall(long number) {
  switch (number) {
    case SYS_futex:
    case SYS_ioctl:
    case SYS_sched_yield:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_clock_nanosleep:
    case SYS_nanosleep:
    case SYS_select:
    case SYS_pselect6:
    case SYS_wait4:
    case SYS_recvfrom:
    case SYS_recvmsg:
    case SYS_write:
    case SYS_restart_syscall: return true;
    default: return false;
  }
}

// -ERESTARTSYS .. -ERESTART_RESTARTBLOCK: the kernel restarts such a call on the way out, rewinding the
// instruction pointer, which would land in the middle of our call. Never a safe point.
bool restarting(uint64_t result) {
  const int64_t value = int64_t(result);
  return value <= -512 && value >= -516;
}

// The kernel's restart codes (include/linux/errno.h, not exported to user space).
// -ERESTART_RESTARTBLOCK (516) is the one left out, below.
constexpr int64_t kERestartSys = 512, kERestartNoIntr = 513, kERestartNoHand = 514;

// What rax holds at PTRACE_INTERRUPT's stop of a thread that was blocked inside a system call and will go back to
// it (restart codes) or return -EINTR from it (epoll_wait, which is never restarted), with every register restored.
// Not -ERESTART_RESTARTBLOCK (nanosleep, clock_nanosleep, poll, a futex wait with a timeout): its restart runs
// restart_syscall, which continues from the task's one restart_block, and a system call made inside our dlopen
// replaces that block: nanosleep and clock_nanosleep reset it on entry, a timed wait or a sleep cut short by a
// signal fills it with its own deadline. Measured (accepting it, a constructor that sleeps 300 ms): a 3 s nanosleep
// returned -EINTR after 0.6 s; with a signal during the constructor's sleep, it returned 0 after 0.6 s. User space
// cannot save and restore the block, so such a thread is run on instead (PTRACE_SYSCALL) until a safe exit, or
// another thread is tried.
bool interrupted_and_resumable(uint64_t result) {
  const int64_t value = int64_t(result);
  return value == -kERestartSys || value == -kERestartNoIntr || value == -kERestartNoHand || value == -EINTR;
}

// The x87/SSE/AVX state as NT_X86_XSTATE reads it (its size depends on the CPU's features).
constexpr size_t kMaxXstateBytes = 64 * 1024;

// One traced thread: seized on construction (seize), detached on destruction, whatever happened in between:
// registers restored where they were changed, a pending signal passed on, the signals that arrived during our
// call sent again.
class Tracee {
 public:
  // Thread `tid` of process `tgid` (the main thread: tid == tgid).
  Tracee(int tgid, int tid) : tgid_(tgid), pid_(tid) {}
  Tracee(const Tracee&) = delete;
  Tracee& operator=(const Tracee&) = delete;
  ~Tracee() { release(); }

  // PTRACE_SEIZE + PTRACE_INTERRUPT (run_to_safe_point waits for the stop). 0, or errno of the refusal.
  int seize() {
    if (ptrace(PTRACE_SEIZE, pid_, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0) return errno;
    attached_ = true;
    if (ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr) != 0) return errno;
    running_ = true;
    return 0;
  }

  // Runs the thread from system call to system call until it returns from a safe one (then stopped there, its
  // registers in saved_), by `deadline_ns`. kNone, kNoSafePoint or kNoSuchProcess.
  InjectError run_to_safe_point(int64_t deadline_ns) {
    for (;;) {
      int status = 0;
      if (running_) {
        const Waited waited = wait_for_stop(pid_, deadline_ns, &status);
        if (waited == Waited::kGone) return gone();
        if (waited == Waited::kTimeout) return InjectError::kNoSafePoint;
        running_ = false;
      }
      int request = PTRACE_SYSCALL;
      int signal = 0;
      const int stop = WSTOPSIG(status);
      if (stop == (SIGTRAP | 0x80)) {
        if (at_safe_syscall_exit()) return InjectError::kNone;
      } else if ((status >> 16) == PTRACE_EVENT_STOP) {
        // PTRACE_INTERRUPT's stop, or a group stop (Ctrl-Z, SIGSTOP), which PTRACE_LISTEN keeps.
        if (is_group_stop_signal(stop)) request = PTRACE_LISTEN;
        else if (at_interrupted_safe_syscall()) return InjectError::kNone;
      } else if ((status >> 16) == 0) {
        signal = stop;  // a signal for the process: passed on, as without us
      }
      if (now_ns() >= deadline_ns) {
        pending_signal_ = signal;
        return InjectError::kNoSafePoint;
      }
      if (ptrace(__ptrace_request(request), pid_, nullptr, reinterpret_cast<void*>(long(signal))) != 0) {
        if (errno == ESRCH) return gone();
        pending_signal_ = signal;
        return InjectError::kNoSafePoint;  // still stopped: released as it is
      }
      running_ = true;
    }
  }

  // Saves the thread's state at the safe point. False when the kernel would not give it.
  bool save_registers() {
    iovec io{&saved_regs_, sizeof saved_regs_};
    if (ptrace(PTRACE_GETREGSET, pid_, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) return false;
    xstate_.resize(kMaxXstateBytes);
    io = {xstate_.data(), xstate_.size()};
    if (ptrace(PTRACE_GETREGSET, pid_, reinterpret_cast<void*>(NT_X86_XSTATE), &io) == 0) {
      xstate_.resize(io.iov_len);
    } else {
      xstate_.clear();  // no XSAVE: the legacy FP/SSE area holds it all
      io = {&saved_fpregs_, sizeof saved_fpregs_};
      if (ptrace(PTRACE_GETREGSET, pid_, reinterpret_cast<void*>(NT_PRFPREG), &io) != 0) return false;
    }
    saved_ = true;
    return true;
  }

  // Calls `function(arg0, arg1)` on the thread, with `text` (when not null) copied onto its stack and passed as
  // arg0. On return `*result` is the function's return value. kNone, kNoSuchProcess, or kDlopenFailed with
  // `why` when the call died of a signal of its own.
  InjectError call(uint64_t function, const char* text, uint64_t arg0, uint64_t arg1, uint64_t* result,
                   std::string* why) {
    user_regs_struct regs = saved_regs_;
    uint64_t sp = (saved_regs_.rsp - 128) & ~uint64_t(15);  // below the red zone, 16-byte aligned
    if (text) {
      const size_t size = (std::strlen(text) + 1 + 15) & ~size_t(15);
      sp -= size;
      std::vector<char> bytes(size, '\0');
      std::memcpy(bytes.data(), text, std::strlen(text));
      if (!poke(sp, bytes.data(), size)) return refused("cannot write the path onto the thread's stack", why);
      arg0 = sp;
    }
    sp -= 8;  // the return address: at the callee's entry rsp + 8 is 16-byte aligned, as the ABI wants
    const uint64_t zero = 0;
    if (!poke(sp, &zero, sizeof zero)) return refused("cannot write onto the thread's stack", why);
    regs.rsp = sp;
    regs.rip = function;
    regs.rdi = arg0;
    regs.rsi = arg1;
    regs.rax = 0;
    regs.orig_rax = uint64_t(-1);  // no system call to restart on the way out of this stop
    changed_ = true;
    if (!set_regs(regs)) return refused("cannot set the thread's registers", why);
    if (ptrace(PTRACE_CONT, pid_, nullptr, nullptr) != 0) return refused("cannot resume the thread", why);
    running_ = true;
    for (;;) {
      int status = 0;
      if (wait_for_stop(pid_, -1, &status) == Waited::kGone) return gone();
      running_ = false;
      const int stop = WSTOPSIG(status);
      if ((status >> 16) == 0 && stop == SIGSEGV) {
        iovec io{&regs, sizeof regs};
        if (ptrace(PTRACE_GETREGSET, pid_, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) return gone();
        if (regs.rip == 0) {
          *result = regs.rax;
          return InjectError::kNone;
        }
        *why = "the call crashed (SIGSEGV in the process, at address 0x" + hex(regs.rip) + ")";
        return InjectError::kDlopenFailed;
      }
      if ((status >> 16) == 0 && (stop == SIGBUS || stop == SIGILL || stop == SIGFPE)) {
        *why = std::string("the call crashed (") + sigabbrev_np(stop) + " in the process)";
        return InjectError::kDlopenFailed;
      }
      // Any other signal waits until the thread is back where it was; a group stop waits until after the call.
      if ((status >> 16) == 0) deferred_signals_.push_back(stop);
      if (ptrace(PTRACE_CONT, pid_, nullptr, nullptr) != 0) return gone();
      running_ = true;
    }
  }

  // The NUL-terminated text at `address` in the target, at most `limit` bytes.
  std::string read_text(uint64_t address, size_t limit) {
    std::string text;
    while (address && text.size() < limit) {
      errno = 0;
      const long word = ptrace(PTRACE_PEEKDATA, pid_, reinterpret_cast<void*>(address), nullptr);
      if (errno != 0) break;
      const char* bytes = reinterpret_cast<const char*>(&word);
      for (size_t i = 0; i < sizeof word; ++i) {
        if (bytes[i] == '\0') return text;
        text += bytes[i];
      }
      address += sizeof word;
    }
    return text;
  }

  bool gone_already() const { return gone_; }

 private:
  // A ptrace request that failed: the process is gone (ESRCH), or the request was refused; then `why` says which,
  // and the thread is still ours to restore and detach.
  InjectError refused(const char* what, std::string* why) {
    if (errno == ESRCH) return gone();
    *why = std::string(what) + ": " + std::strerror(errno);
    return InjectError::kDlopenFailed;
  }

  InjectError gone() {
    gone_ = true;
    return InjectError::kNoSuchProcess;
  }

  static std::string hex(uint64_t value) {
    char text[24];
    std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(value));
    return text;
  }

  // At a syscall stop: true when it is the exit of a safe call that will not be restarted (registers saved).
  bool at_safe_syscall_exit() {
    __ptrace_syscall_info info{};
    if (ptrace(PTRACE_GET_SYSCALL_INFO, pid_, reinterpret_cast<void*>(sizeof info), &info) <= 0) return false;
    if (info.op != PTRACE_SYSCALL_INFO_EXIT) return false;
    user_regs_struct regs{};
    iovec io{&regs, sizeof regs};
    if (ptrace(PTRACE_GETREGSET, pid_, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) return false;
    return safe_syscall(long(regs.orig_rax)) && !restarting(regs.rax) && save_registers();
  }

  // At PTRACE_INTERRUPT's stop: true when the thread was blocked inside a safe call that it goes back to (or that
  // returns -EINTR) once its registers are restored (registers saved). The kernel's own restart logic reads the
  // same two registers (orig_rax holds a call's number only on a system call's way out); the instruction before
  // rip must then be the `syscall` that made it.
  bool at_interrupted_safe_syscall() {
    user_regs_struct regs{};
    iovec io{&regs, sizeof regs};
    if (ptrace(PTRACE_GETREGSET, pid_, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) return false;
    if (!safe_syscall(long(regs.orig_rax)) || !interrupted_and_resumable(regs.rax)) return false;
    errno = 0;
    const long code = ptrace(PTRACE_PEEKTEXT, pid_, reinterpret_cast<void*>(regs.rip - 2), nullptr);
    if (errno != 0 || (code & 0xffff) != 0x050f) return false;  // 0f 05: syscall
    return save_registers();
  }

  bool set_regs(user_regs_struct& regs) {
    iovec io{&regs, sizeof regs};
    return ptrace(PTRACE_SETREGSET, pid_, reinterpret_cast<void*>(NT_PRSTATUS), &io) == 0;
  }

  bool poke(uint64_t address, const void* bytes, size_t size) {
    for (size_t at = 0; at < size; at += sizeof(long)) {
      long word = 0;
      std::memcpy(&word, static_cast<const char*>(bytes) + at, std::min(sizeof word, size - at));
      if (ptrace(PTRACE_POKEDATA, pid_, reinterpret_cast<void*>(address + at), reinterpret_cast<void*>(word)) != 0)
        return false;
    }
    return true;
  }

  // Puts the thread back as it was and lets it go: never leaves it stopped or traced.
  void release() {
    if (!attached_ || gone_) return;
    if (running_) {
      // Stop it to detach it; the stop may be a signal's, to be passed on.
      ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr);
      int status = 0;
      if (wait_for_stop(pid_, now_ns() + 2000000000LL, &status) != Waited::kStopped) return;
      if ((status >> 16) == 0 && WSTOPSIG(status) != (SIGTRAP | 0x80)) pending_signal_ = WSTOPSIG(status);
    }
    if (changed_) {
      if (!xstate_.empty()) {
        iovec io{xstate_.data(), xstate_.size()};
        ptrace(PTRACE_SETREGSET, pid_, reinterpret_cast<void*>(NT_X86_XSTATE), &io);
      } else {
        iovec io{&saved_fpregs_, sizeof saved_fpregs_};
        ptrace(PTRACE_SETREGSET, pid_, reinterpret_cast<void*>(NT_PRFPREG), &io);
      }
      set_regs(saved_regs_);
      pending_signal_ = 0;  // our call's SIGSEGV at address 0: dropped
    }
    for (int signal : deferred_signals_) syscall(SYS_tgkill, tgid_, pid_, signal);
    ptrace(PTRACE_DETACH, pid_, nullptr, reinterpret_cast<void*>(long(pending_signal_)));
  }

  const int tgid_;
  const int pid_;  // the thread's id: ptrace's "pid" is a thread's
  bool attached_ = false;
  bool running_ = false;  // resumed, not yet seen stopped
  bool gone_ = false;     // exited, or ptrace says no such process
  bool saved_ = false;
  bool changed_ = false;  // registers set for a call
  int pending_signal_ = 0;
  std::vector<int> deferred_signals_;
  user_regs_struct saved_regs_{};
  user_fpregs_struct saved_fpregs_{};
  std::vector<uint8_t> xstate_;
};

// The signals that would end memtrace by default, blocked while the target runs our call (restored on scope
// exit): a tracer gone mid-call would leave the thread returning to address 0.
class BlockedTerminationSignals {
 public:
  BlockedTerminationSignals() {
    sigset_t block;
    sigemptyset(&block);
    for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) sigaddset(&block, signal);
    pthread_sigmask(SIG_BLOCK, &block, &old_);
  }
  ~BlockedTerminationSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

// The process's threads, the main thread first, then the others in /proc/PID/task's order. Empty when the
// process is gone.
std::vector<int> list_threads(int pid) {
  std::vector<int> threads;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    const int tid = std::atoi(entry.path().filename().c_str());
    if (tid > 0 && tid != pid) threads.push_back(tid);
  }
  if (error) return {};
  threads.insert(threads.begin(), pid);
  return threads;
}

// Why the main thread could not be seized, in the user's terms.
InjectResult seize_refused(int pid, int refused, int yama_scope) {
  if (refused == ESRCH) return {InjectError::kNoSuchProcess, {}};
  TargetProcess now;
  if (read_target_process(pid, &now) && now.tracer_pid != 0)
    return {InjectError::kPtraceRefused, already_traced_message(now.tracer_pid, command_name(now.tracer_pid))};
  if (refused == EPERM && yama_scope == 1) return {InjectError::kYamaScope, "1"};
  return {InjectError::kPtraceRefused, std::string("ptrace refused: ") + std::strerror(refused) +
                                           " (a container needs --cap-add=SYS_PTRACE; a seccomp profile may "
                                           "forbid ptrace)"};
}

// Step 2: the main thread, until `main_deadline_ns`, then each other thread with an equal share of what is left
// before `deadline_ns`. On success `*chosen` is the thread stopped at its safe point, registers saved; every other
// thread tried is detached again, as it was.
InjectResult find_safe_point(int pid, int64_t main_deadline_ns, int64_t deadline_ns, int yama_scope,
                             std::unique_ptr<Tracee>* chosen) {
  auto main_thread = std::make_unique<Tracee>(pid, pid);
  if (const int refused = main_thread->seize(); refused != 0) return seize_refused(pid, refused, yama_scope);
  InjectError reached = main_thread->run_to_safe_point(main_deadline_ns);
  if (reached == InjectError::kNone) {
    *chosen = std::move(main_thread);
    return {};
  }
  main_thread.reset();  // detached: it runs on as before (gone: the process may still be, its main thread ended)
  const std::vector<int> threads = list_threads(pid);
  for (size_t i = 1; i < threads.size(); ++i) {
    const int64_t share_ns = (deadline_ns - now_ns()) / int64_t(threads.size() - i);
    auto thread = std::make_unique<Tracee>(pid, threads[i]);
    if (thread->seize() != 0) continue;  // it ended meanwhile
    reached = thread->run_to_safe_point(now_ns() + std::max<int64_t>(share_ns, 0));
    if (reached == InjectError::kNone) {
      *chosen = std::move(thread);
      return {};
    }
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) return {InjectError::kNoSuchProcess, "it exited during the injection"};
  return {InjectError::kNoSafePoint, {}};
}

InjectResult inject_traced(int pid, const std::string& library, int timeout_ms, const LoaderFunctions& functions,
                           int yama_scope) {
  BlockedTerminationSignals blocked;
  const int64_t start_ns = now_ns(), deadline_ns = start_ns + int64_t(timeout_ms) * 1000000;
  // Alone, the main thread has all the time; else half, the others the rest.
  const bool alone = list_threads(pid).size() <= 1;
  const int64_t main_deadline_ns = alone ? deadline_ns : start_ns + (deadline_ns - start_ns) / 2;
  std::unique_ptr<Tracee> tracee;
  InjectResult found = find_safe_point(pid, main_deadline_ns, deadline_ns, yama_scope, &tracee);
  if (found.error == InjectError::kNoSafePoint) return {found.error, std::to_string(timeout_ms)};
  if (found.error != InjectError::kNone) return found;
  uint64_t handle = 0;
  std::string why;
  InjectError called = tracee->call(functions.dlopen, library.c_str(), 0, RTLD_NOW, &handle, &why);
  if (called == InjectError::kNoSuchProcess) return {called, "it exited during the injection"};
  if (called != InjectError::kNone) return {called, why};
  if (handle != 0) return {};
  if (!functions.dlerror) return {InjectError::kDlopenFailed, library + ": dlopen returned NULL"};
  uint64_t text = 0;
  called = tracee->call(functions.dlerror, nullptr, 0, 0, &text, &why);
  if (called == InjectError::kNoSuchProcess) return {called, "it exited during the injection"};
  if (called != InjectError::kNone) return {called, why};
  const std::string message = tracee->read_text(text, 1024);
  return {InjectError::kDlopenFailed, message.empty() ? library + ": dlopen returned NULL" : message};
}

#endif  // __x86_64__

}  // namespace

InjectResult inject_library(int pid, const std::string& library, int timeout_ms) {
  TargetProcess target;
  if (!read_target_process(pid, &target)) return {InjectError::kNoSuchProcess, {}};
  const int yama_scope = yama_ptrace_scope();
  InjectResult allowed = check_ptrace_allowed(target, privileges_of_this_process(), yama_scope);
  if (allowed.error != InjectError::kNone) return allowed;
  if (library.empty() || library[0] != '/')
    return {InjectError::kDlopenFailed, library + ": the library must be given by its absolute path"};
#if defined(__x86_64__)
  LoaderFunctions functions;
  InjectResult found = find_loader_functions(pid, &functions);
  if (found.error != InjectError::kNone) return found;
  return inject_traced(pid, library, timeout_ms, functions, yama_scope);
#else
  (void)timeout_ms;
  return {InjectError::kPtraceRefused,
          "loading a library into a running process is not supported on this "
          "architecture yet (x86-64 only): start the job with "
          "LD_PRELOAD=libmemtrace.so MEMTRACE_START=dormant instead"};
#endif
}

std::string inject_error_message(int pid, const InjectResult& result) {
  const std::string process = "process " + std::to_string(pid);
  const std::string& detail = result.detail;
  switch (result.error) {
    case InjectError::kNone: return {};
    case InjectError::kNoSuchProcess:
      return "no process " + std::to_string(pid) + " is running" + (detail.empty() ? "" : " (" + detail + ")");
    case InjectError::kNotOwner:
      return process + " belongs to another user (" + detail +
             "): only its owner, or root with CAP_SYS_PTRACE, may attach";
    case InjectError::kYamaScope: return yama_message(std::atoi(detail.c_str()));
    case InjectError::kPtraceRefused: return detail;
    case InjectError::kSetuid:
      return process + " runs a set-uid or set-gid program (" + detail + "): memtrace does not load code into one";
    case InjectError::kNoCuda:
      return process + " has not loaded CUDA (no libcuda.so in /proc/" + std::to_string(pid) +
             "/maps): nothing to trace";
    case InjectError::kNoDlopen: return "cannot find dlopen in " + process + ": " + detail;
    case InjectError::kNoSafePoint:
      return process + " reached no safe point within " + detail +
             " ms (a thread in, or returning from, a system call where a library may be loaded); try again, or start "
             "it with MEMTRACE_START=dormant";
    case InjectError::kDlopenFailed: return process + "'s dlopen failed: " + detail;
  }
  return {};
}

}  // namespace memtrace
