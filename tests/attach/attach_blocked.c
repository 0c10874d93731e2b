// A target that never reaches a safe point: its only thread blocks in read() on stdin (a system call the loader
// makes under its lock, so never a safe point) until a line comes, then prints "got N bytes" and exits with status 5.
#include <stdio.h>
#include <unistd.h>

int main(void) {
  char line[64];
  const ssize_t n = read(0, line, sizeof line);
  printf("got %zd bytes\n", n);
  return 5;
}
