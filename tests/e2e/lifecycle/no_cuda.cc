// A process that never touches CUDA: the tracer must start nothing and write no file here.
#include <cstdio>
#include <cstdlib>
#include <string>

int main() {
  std::string text(1 << 20, 'x');  // some ordinary heap traffic
  void* p = std::malloc(4096);
  std::free(p);
  std::printf("no CUDA here: %zu\n", text.size());
  return 0;
}
