// The injector's test target: `attach_target ITERATIONS SLEEP_US [LIBRARY]` runs ITERATIONS rounds of arithmetic
// whose values stay in registers (general and SSE) across the round's two system calls, nanosleep(SLEEP_US) and a
// write of "." to stdout, made with the syscall instruction itself so that no call spills them: an injection that
// did not restore every register changes the final line. Then it prints the values and exits with status 7.
// LIBRARY, when given, is dlopen()ed first (a file named libcuda.so.1: the target "has CUDA"). SIGUSR1 is counted
// and the count printed last: a signal that came during an injection is delivered once, after it.
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long raw_syscall3(long number, long a, long b, long c) {
#if defined(__x86_64__)
  long result;
  __asm__ volatile("syscall" : "=a"(result) : "a"(number), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return result;
#else
  return syscall(number, a, b, c);
#endif
}

static volatile sig_atomic_t usr1_count;
static void count_usr1(int signal) {
  (void)signal;
  ++usr1_count;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const long iterations = atol(argv[1]);
  const long sleep_us = atol(argv[2]);
  if (argc > 3 && !dlopen(argv[3], RTLD_NOW)) return 3;
  struct sigaction usr1 = {0};
  usr1.sa_handler = count_usr1;
  usr1.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &usr1, NULL);
  const struct timespec pause = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
  uint64_t a = 1, b = 0;
  double x = 1.0, y = 0.25;
  for (long i = 0; i < iterations; ++i) {
    a = a * 6364136223846793005ULL + 1442695040888963407ULL;
    b += a >> 33;
    x = x * 1.0000001 + 0.5;
    y = y * 0.999 + x * 1e-9;
    raw_syscall3(SYS_nanosleep, (long)&pause, 0, 0);
    raw_syscall3(SYS_write, 1, (long)".", 1);
  }
  printf("\na=%llu b=%llu x=%.17g y=%.17g usr1=%d\n", (unsigned long long)a, (unsigned long long)b, x, y,
         (int)usr1_count);
  return 7;
}
