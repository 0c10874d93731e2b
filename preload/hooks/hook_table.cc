// The hook table (hook_table.h) and the handed-out entry points: for each hook of hooks.def, the entry point
// the resolver hands out marks the path (kHandedOut) and calls the hook's hidden alias, so that the hook
// forwards to what the driver or runtime returned.
#include "hooks/hook_table.h"

#include "record/tls.h"

// The hidden aliases, defined by the hook files next to their targets (runtime_hooks.cc, driver_hooks.cc,
// sync_hooks.cc), declared here for the table.
#define MEMTRACE_RUNTIME_HOOK(symbol) \
  extern "C" decltype(::symbol) memtrace_own_##symbol __attribute__((visibility("hidden")));
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) MEMTRACE_RUNTIME_HOOK(symbol)
#include "hooks/hooks.def"

namespace memtrace {

MEMTRACE_TLS HookPath t_hook_path = HookPath::kExported;

namespace {

// The handed-out entry point of the hook `Own` (of type `Fn`): a function of the hook's own signature.
template <auto* Own, typename Fn>
struct HandedOut;
template <auto* Own, typename R, typename... Args>
struct HandedOut<Own, R(Args...)> {
  static R call(Args... args) {
    t_hook_path = HookPath::kHandedOut;
    return Own(args...);
  }
};

}  // namespace

HookSlot g_hooks[kHookCount] = {
#define MEMTRACE_RUNTIME_HOOK(symbol)                                                        \
  {                                                                                          \
      #symbol,                                                                               \
      nullptr,                                                                               \
      0,                                                                                     \
      false,                                                                                 \
      reinterpret_cast<void*>(&HandedOut<&memtrace_own_##symbol, decltype(::symbol)>::call), \
      {nullptr},                                                                             \
      {nullptr}},
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream)           \
  {#symbol,                                                                               \
   base_name,                                                                             \
   min_version,                                                                           \
   per_thread_stream,                                                                     \
   reinterpret_cast<void*>(&HandedOut<&memtrace_own_##symbol, decltype(::symbol)>::call), \
   {nullptr},                                                                             \
   {nullptr}},
// Our own hidden name: no other definition can take its place.
#define MEMTRACE_DRIVER_PROC(symbol, base_name, min_version, per_thread_stream) \
  {#symbol,                                                                     \
   base_name,                                                                   \
   min_version,                                                                 \
   per_thread_stream,                                                           \
   reinterpret_cast<void*>(&HandedOut<&::symbol, decltype(::symbol)>::call),    \
   {nullptr},                                                                   \
   {nullptr}},
#include "hooks/hooks.def"
};

}  // namespace memtrace
