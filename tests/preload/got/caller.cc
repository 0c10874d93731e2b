// libgot_caller_lazy.so / libgot_caller_now.so (the second linked -z relro -z now, so that its GOT is read-only
// after loading): each calls got_callee through its PLT (a JUMP_SLOT relocation). GOT_CALLER names the entry
// point apart.
extern "C" int got_callee(int x);

#define GOT_JOIN2(a, b) a##b
#define GOT_JOIN(a, b) GOT_JOIN2(a, b)

extern "C" int GOT_JOIN(GOT_CALLER, _call)(int x) { return got_callee(x); }
