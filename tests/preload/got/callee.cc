// libgot_callee.so: defines the function the two caller libraries import by name (got_patch_test.cc).
extern "C" int got_callee(int x) { return x + 1; }
