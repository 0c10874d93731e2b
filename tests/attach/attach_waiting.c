// A target whose threads block for good, for the injector's tests: no thread returns from a system call on its own
// while the test injects, so only a thread interrupted inside a blocking call is a safe point.
//   attach_waiting join: the main thread waits in pthread_join for a worker that loops on poll(stdin, 1 ms) until a
//     line comes; then prints "worker read N bytes" and exits with status 4.
//   attach_waiting blocked futex|poll SLEEP_MS: the main thread blocks in read(stdin) (never a safe point); three
//     threads started in this order block too: one in nanosleep(SLEEP_MS), then, in the order the second argument
//     names first, one in pthread_cond_wait and one in ppoll() on a pipe of its own. It prints "ready" once all are
//     blocked-to-be. When a line comes the main thread wakes the other two (a byte into the pipe, the condition
//     signalled), joins all three and prints what each saw, the sleeper whether nanosleep returned 0 after the
//     whole time; exit status 6.
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long sleep_ms;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t woken = PTHREAD_COND_INITIALIZER;
static int line_came;
static int wake_pipe[2];

static long elapsed_ms_since(const struct timespec* start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
}

static void* poll_stdin_until_a_line(void* unused) {
  (void)unused;
  struct pollfd input = {0, POLLIN, 0};
  while (poll(&input, 1, 1) == 0) {
  }
  char line[64];
  return (void*)read(0, line, sizeof line);
}

static void* sleep_whole_time(void* unused) {
  (void)unused;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  const struct timespec pause = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000};
  const int result = nanosleep(&pause, NULL);
  return (void*)(long)(result == 0 && elapsed_ms_since(&start) >= sleep_ms);
}

static void* wait_for_condition(void* unused) {
  (void)unused;
  pthread_mutex_lock(&lock);
  while (!line_came) pthread_cond_wait(&woken, &lock);
  pthread_mutex_unlock(&lock);
  return (void*)1;
}

static void* poll_wake_pipe(void* unused) {
  (void)unused;
  struct pollfd wake = {wake_pipe[0], POLLIN, 0};
  return (void*)(long)ppoll(&wake, 1, NULL, NULL);
}

static int join(void) {
  pthread_t worker;
  pthread_create(&worker, NULL, poll_stdin_until_a_line, NULL);
  void* bytes;
  pthread_join(worker, &bytes);
  printf("worker read %ld bytes\n", (long)bytes);
  return 4;
}

static int blocked(int futex_first) {
  if (pipe(wake_pipe) != 0) return 2;
  pthread_t sleeper, waiter, poller;
  pthread_create(&sleeper, NULL, sleep_whole_time, NULL);
  if (futex_first) pthread_create(&waiter, NULL, wait_for_condition, NULL);
  pthread_create(&poller, NULL, poll_wake_pipe, NULL);
  if (!futex_first) pthread_create(&waiter, NULL, wait_for_condition, NULL);
  printf("ready\n");
  fflush(stdout);
  char line[64];
  const ssize_t n = read(0, line, sizeof line);
  pthread_mutex_lock(&lock);
  line_came = 1;
  pthread_cond_signal(&woken);
  pthread_mutex_unlock(&lock);
  if (write(wake_pipe[1], "x", 1) != 1) return 3;
  void *slept, *waited, *polled;
  pthread_join(sleeper, &slept);
  pthread_join(waiter, &waited);
  pthread_join(poller, &polled);
  printf("main read %zd bytes\nslept %ld ms in full: %s\ncondition: %s\nppoll: %ld\n", n, sleep_ms,
         slept ? "yes" : "no", waited ? "woken" : "no", (long)polled);
  return 6;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "join") == 0) return join();
  if (argc == 4 && strcmp(argv[1], "blocked") == 0) {
    sleep_ms = atol(argv[3]);
    return blocked(strcmp(argv[2], "futex") == 0);
  }
  return 2;
}
