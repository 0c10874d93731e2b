// libgot_taker.so: takes got_callee's address (a GLOB_DAT relocation, in the .got under RELRO). Apart from the
// callers because a library that both calls and takes the address gets one GLOB_DAT slot for both (the linker's
// .plt.got), and the test wants a JUMP_SLOT of each kind too.
extern "C" int got_callee(int x);

extern "C" void* taker_address() { return reinterpret_cast<void*>(&got_callee); }
