// libmemtrace.so as the NVTX injection library: the job's NVTX ranges (torch.cuda.nvtx.range_push, Lightning's and
// Megatron's ranges, nvtx3::scoped_range) arrive as RangeEvent records (proto/memtrace.proto; docs/tracing.md).
//
// The protocol (NVTX v3, header-only: nvtx3/nvtxDetail/nvtxInit.h, nvtxImpl.h, nvtxTypes.h). Every library built
// with the NVTX headers carries its own NVTX instance: a table of function pointers, one per API call, which at
// first point to an initializer. The first NVTX call of an instance reads $NVTX_INJECTION64_PATH, dlopen()s that
// library, and calls its exported InitializeInjectionNvtx2(getExportTable). The injection asks getExportTable for
// the callbacks table (NVTX_ETID_CALLBACKS) and through its GetModuleFunctionTable(module) for a module's slots:
// an array, indexed by callback id (NvtxCallbackIdCore, NvtxCallbackIdCore2), of pointers to the instance's
// function pointers, which the injection overwrites with its own functions. It returns 1 for success; the
// instance then sets every slot left untouched to a no-op, and from then on each NVTX call is one indirect call
// into the injection. A process with several instances (libtorch's, the job's own) calls InitializeInjectionNvtx2
// once per instance, each with its own getExportTable.
//
// What is taken: the CORE module's range and mark calls (RangePushA/W/Ex, RangePop, RangeStartA/W/Ex, RangeEnd,
// MarkA/W/Ex) and CORE2's domain range calls (DomainRangePushEx/Pop, DomainRangeStartEx/End, DomainMarkEx), the
// domain itself not recorded. Names: ASCII and wide (UTF-32, converted to UTF-8) messages, at most 255 bytes kept;
// a registered string handle (NVTX_MESSAGE_TYPE_REGISTERED) is recorded without a name. Nothing is recorded before
// the trace runs (its first CUDA call; record_range), so ranges opened before it are missing from the trace.
//
// Chaining: `memtrace run` sets NVTX_INJECTION64_PATH to this library and, where the job's environment named
// another injection library (Nsight Systems', say), passes that one on in MEMTRACE_NVTX_CHAIN. For each instance,
// InitializeInjectionNvtx2 first loads that library and calls its InitializeInjectionNvtx2 with the same
// getExportTable, then reads back which of our slots it filled, keeps those functions, and installs its own, which
// call them after recording: both tools see every range call. Slots we do not take stay the chained tool's. Its
// return values (push depth, range ids) are the ones the job gets.
//
// In the callbacks: no allocation, nothing that throws, no lock but the recorder's (record_range), bounded reads
// of the job's strings.
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#define NVTX_NO_IMPL  // declarations and types only: the instances are the job's
#include <nvtx3/nvToolsExt.h>

#include "hooks/export.h"
#include "record/recorder.h"
#include "record/schema.h"
#include "record/tls.h"

extern "C" MEMTRACE_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

namespace memtrace {
namespace {

// The chained tool's callbacks (nullptr: none). Written by each instance's initialization (under g_init_lock),
// read by the callbacks on any thread.
struct ChainedCallbacks {
  std::atomic<nvtxMarkEx_impl_fntype> mark_ex{nullptr};
  std::atomic<nvtxMarkA_impl_fntype> mark_a{nullptr};
  std::atomic<nvtxMarkW_impl_fntype> mark_w{nullptr};
  std::atomic<nvtxRangeStartEx_impl_fntype> range_start_ex{nullptr};
  std::atomic<nvtxRangeStartA_impl_fntype> range_start_a{nullptr};
  std::atomic<nvtxRangeStartW_impl_fntype> range_start_w{nullptr};
  std::atomic<nvtxRangeEnd_impl_fntype> range_end{nullptr};
  std::atomic<nvtxRangePushEx_impl_fntype> range_push_ex{nullptr};
  std::atomic<nvtxRangePushA_impl_fntype> range_push_a{nullptr};
  std::atomic<nvtxRangePushW_impl_fntype> range_push_w{nullptr};
  std::atomic<nvtxRangePop_impl_fntype> range_pop{nullptr};
  std::atomic<nvtxDomainMarkEx_impl_fntype> domain_mark_ex{nullptr};
  std::atomic<nvtxDomainRangeStartEx_impl_fntype> domain_range_start_ex{nullptr};
  std::atomic<nvtxDomainRangeEnd_impl_fntype> domain_range_end{nullptr};
  std::atomic<nvtxDomainRangePushEx_impl_fntype> domain_range_push_ex{nullptr};
  std::atomic<nvtxDomainRangePop_impl_fntype> domain_range_pop{nullptr};
};
ChainedCallbacks g_chain;
pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<uint64_t> g_next_range_id{0};  // our nvtxRangeId_t values where no chained tool gives them
MEMTRACE_TLS int t_push_depth = 0;         // open push ranges of this thread (all domains), for the return value

// A message as UTF-8, at most kMaxRangeNameBytes bytes (plus room for one more sequence, cut by record_range).
struct NameBuffer {
  char bytes[kMaxRangeNameBytes + 8];
  size_t size = 0;
};

// Appends code point `c` as UTF-8 ('?' for one that is not a Unicode scalar value).
void append_utf8(uint32_t c, NameBuffer* out) {
  char* p = out->bytes + out->size;
  if (c >= 0xD800 && c <= 0xDFFF) c = '?';
  if (c > 0x10FFFF) c = '?';
  if (c < 0x80) {
    p[0] = static_cast<char>(c);
    out->size += 1;
  } else if (c < 0x800) {
    p[0] = static_cast<char>(0xC0 | (c >> 6));
    p[1] = static_cast<char>(0x80 | (c & 0x3F));
    out->size += 2;
  } else if (c < 0x10000) {
    p[0] = static_cast<char>(0xE0 | (c >> 12));
    p[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    p[2] = static_cast<char>(0x80 | (c & 0x3F));
    out->size += 3;
  } else {
    p[0] = static_cast<char>(0xF0 | (c >> 18));
    p[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    p[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    p[3] = static_cast<char>(0x80 | (c & 0x3F));
    out->size += 4;
  }
}

// A wide message (wchar_t is UTF-32 on Linux) as UTF-8, reading at most kMaxRangeNameBytes characters.
void wide_to_utf8(const wchar_t* message, NameBuffer* out) {
  out->size = 0;
  if (!message) return;
  for (size_t i = 0; i < kMaxRangeNameBytes && message[i] != 0 && out->size <= kMaxRangeNameBytes; i++)
    append_utf8(static_cast<uint32_t>(message[i]), out);
}

void record_ascii(RangeKind kind, const char* message, uint64_t range_id) {
  // One byte more than is kept, so that record_range's cut sees where a long name goes on.
  const size_t len = message ? strnlen(message, kMaxRangeNameBytes + 1) : 0;
  record_range(kind, message, len, range_id);
}

void record_wide(RangeKind kind, const wchar_t* message, uint64_t range_id) {
  NameBuffer name;
  wide_to_utf8(message, &name);
  record_range(kind, name.bytes, name.size, range_id);
}

// The Ex forms: the message of an event attributes struct, when the struct is large enough to hold one.
void record_attributes(RangeKind kind, const nvtxEventAttributes_t* attributes, uint64_t range_id) {
  const size_t needed = offsetof(nvtxEventAttributes_t, message) + sizeof(attributes->message);
  if (!attributes || attributes->size < needed) {
    record_range(kind, nullptr, 0, range_id);
  } else if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    record_ascii(kind, attributes->message.ascii, range_id);
  } else if (attributes->messageType == NVTX_MESSAGE_TYPE_UNICODE) {
    record_wide(kind, attributes->message.unicode, range_id);
  } else {
    record_range(kind, nullptr, 0, range_id);  // a registered string handle, or no message
  }
}

// Push: the depth the range opens at, from the chained tool where it answers.
int pushed(int chained_depth, bool chained) {
  const int depth = t_push_depth++;
  return chained ? chained_depth : depth;
}
// Pop: the depth of the range closed, -1 with none open.
int popped(int chained_depth, bool chained) {
  const int depth = t_push_depth > 0 ? --t_push_depth : -1;
  return chained ? chained_depth : depth;
}
uint64_t new_range_id() { return g_next_range_id.fetch_add(1, std::memory_order_relaxed) + 1; }

// ---- CORE ---------------------------------------------------------------------------------------------------

void mark_ex(const nvtxEventAttributes_t* attributes) {
  record_attributes(RangeKind::kMark, attributes, 0);
  if (auto f = g_chain.mark_ex.load(std::memory_order_relaxed)) f(attributes);
}
void mark_a(const char* message) {
  record_ascii(RangeKind::kMark, message, 0);
  if (auto f = g_chain.mark_a.load(std::memory_order_relaxed)) f(message);
}
void mark_w(const wchar_t* message) {
  record_wide(RangeKind::kMark, message, 0);
  if (auto f = g_chain.mark_w.load(std::memory_order_relaxed)) f(message);
}
nvtxRangeId_t range_start_ex(const nvtxEventAttributes_t* attributes) {
  auto f = g_chain.range_start_ex.load(std::memory_order_relaxed);
  const nvtxRangeId_t id = f ? f(attributes) : new_range_id();
  record_attributes(RangeKind::kStart, attributes, id);
  return id;
}
nvtxRangeId_t range_start_a(const char* message) {
  auto f = g_chain.range_start_a.load(std::memory_order_relaxed);
  const nvtxRangeId_t id = f ? f(message) : new_range_id();
  record_ascii(RangeKind::kStart, message, id);
  return id;
}
nvtxRangeId_t range_start_w(const wchar_t* message) {
  auto f = g_chain.range_start_w.load(std::memory_order_relaxed);
  const nvtxRangeId_t id = f ? f(message) : new_range_id();
  record_wide(RangeKind::kStart, message, id);
  return id;
}
void range_end(nvtxRangeId_t id) {
  record_range(RangeKind::kEnd, nullptr, 0, id);
  if (auto f = g_chain.range_end.load(std::memory_order_relaxed)) f(id);
}
int range_push_ex(const nvtxEventAttributes_t* attributes) {
  record_attributes(RangeKind::kPush, attributes, 0);
  auto f = g_chain.range_push_ex.load(std::memory_order_relaxed);
  return pushed(f ? f(attributes) : 0, f != nullptr);
}
int range_push_a(const char* message) {
  record_ascii(RangeKind::kPush, message, 0);
  auto f = g_chain.range_push_a.load(std::memory_order_relaxed);
  return pushed(f ? f(message) : 0, f != nullptr);
}
int range_push_w(const wchar_t* message) {
  record_wide(RangeKind::kPush, message, 0);
  auto f = g_chain.range_push_w.load(std::memory_order_relaxed);
  return pushed(f ? f(message) : 0, f != nullptr);
}
int range_pop() {
  record_range(RangeKind::kPop, nullptr, 0, 0);
  auto f = g_chain.range_pop.load(std::memory_order_relaxed);
  return popped(f ? f() : 0, f != nullptr);
}

// ---- CORE2 (domains) ----------------------------------------------------------------------------------------

void domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  record_attributes(RangeKind::kMark, attributes, 0);
  if (auto f = g_chain.domain_mark_ex.load(std::memory_order_relaxed)) f(domain, attributes);
}
nvtxRangeId_t domain_range_start_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  auto f = g_chain.domain_range_start_ex.load(std::memory_order_relaxed);
  const nvtxRangeId_t id = f ? f(domain, attributes) : new_range_id();
  record_attributes(RangeKind::kStart, attributes, id);
  return id;
}
void domain_range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  record_range(RangeKind::kEnd, nullptr, 0, id);
  if (auto f = g_chain.domain_range_end.load(std::memory_order_relaxed)) f(domain, id);
}
int domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  record_attributes(RangeKind::kPush, attributes, 0);
  auto f = g_chain.domain_range_push_ex.load(std::memory_order_relaxed);
  return pushed(f ? f(domain, attributes) : 0, f != nullptr);
}
int domain_range_pop(nvtxDomainHandle_t domain) {
  record_range(RangeKind::kPop, nullptr, 0, 0);
  auto f = g_chain.domain_range_pop.load(std::memory_order_relaxed);
  return popped(f ? f(domain) : 0, f != nullptr);
}

// ---- attaching ----------------------------------------------------------------------------------------------

// One slot we take: module and callback id, our function, and where the chained tool's function is kept.
struct Slot {
  NvtxCallbackModule module;
  unsigned id;
  NvtxFunctionPointer ours;
  std::atomic<NvtxFunctionPointer>* chained;
};

template <typename F>
NvtxFunctionPointer erase(F f) {
  return reinterpret_cast<NvtxFunctionPointer>(f);
}
template <typename F>
std::atomic<NvtxFunctionPointer>* erase(std::atomic<F>* f) {
  static_assert(sizeof(std::atomic<F>) == sizeof(std::atomic<NvtxFunctionPointer>));
  return reinterpret_cast<std::atomic<NvtxFunctionPointer>*>(f);
}

const Slot kSlots[] = {
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkEx, erase(mark_ex), erase(&g_chain.mark_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkA, erase(mark_a), erase(&g_chain.mark_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkW, erase(mark_w), erase(&g_chain.mark_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartEx, erase(range_start_ex), erase(&g_chain.range_start_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartA, erase(range_start_a), erase(&g_chain.range_start_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartW, erase(range_start_w), erase(&g_chain.range_start_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeEnd, erase(range_end), erase(&g_chain.range_end)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, erase(range_push_ex), erase(&g_chain.range_push_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, erase(range_push_a), erase(&g_chain.range_push_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushW, erase(range_push_w), erase(&g_chain.range_push_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, erase(range_pop), erase(&g_chain.range_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainMarkEx, erase(domain_mark_ex), erase(&g_chain.domain_mark_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx, erase(domain_range_start_ex),
     erase(&g_chain.domain_range_start_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd, erase(domain_range_end), erase(&g_chain.domain_range_end)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, erase(domain_range_push_ex),
     erase(&g_chain.domain_range_push_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, erase(domain_range_pop), erase(&g_chain.domain_range_pop)},
};
constexpr size_t kSlotCount = sizeof kSlots / sizeof kSlots[0];

// Where the instance keeps slot `s`'s function pointer; nullptr when its table does not have it.
NvtxFunctionPointer* slot_address(const NvtxExportTableCallbacks* callbacks, const Slot& s) {
  NvtxFunctionTable table = nullptr;
  unsigned int last_id = 0;  // the table's highest callback id
  if (!callbacks->GetModuleFunctionTable(s.module, &table, &last_id) || !table || s.id > last_id) return nullptr;
  return table[s.id];
}

// Calls the chained injection library's InitializeInjectionNvtx2 (MEMTRACE_NVTX_CHAIN) for this instance and keeps
// the functions it put in our slots. A library that fails has the slots it touched put back.
void attach_chained(NvtxGetExportTableFunc_t get_export_table, const NvtxExportTableCallbacks* callbacks) {
  const char* path = getenv("MEMTRACE_NVTX_CHAIN");
  if (!path || !*path) return;
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);  // never closed: the instance may call into it at any time
  if (!library) return;
  auto init = reinterpret_cast<NvtxInitializeInjectionNvtxFunc_t>(dlsym(library, "InitializeInjectionNvtx2"));
  if (!init || init == &InitializeInjectionNvtx2) return;  // itself (chained to libmemtrace.so) would recurse
  NvtxFunctionPointer before[kSlotCount];
  for (size_t i = 0; i < kSlotCount; i++) {
    NvtxFunctionPointer* slot = slot_address(callbacks, kSlots[i]);
    before[i] = slot ? *slot : nullptr;
  }
  const bool attached = init(get_export_table) != 0;
  for (size_t i = 0; i < kSlotCount; i++) {
    NvtxFunctionPointer* slot = slot_address(callbacks, kSlots[i]);
    if (!slot || *slot == before[i]) continue;  // still the instance's initializer: the tool did not take it
    if (attached) kSlots[i].chained->store(*slot, std::memory_order_relaxed);
    else *slot = before[i];
  }
}

}  // namespace
}  // namespace memtrace

// NVTX's entry point into an injection library (see the top of this file). Returns 1 (attached) when the instance
// gives us its callbacks table, 0 otherwise (the instance then makes every call a no-op).
extern "C" MEMTRACE_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  using namespace memtrace;
  if (!get_export_table) return 0;
  auto callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || !callbacks->GetModuleFunctionTable)
    return 0;
  pthread_mutex_lock(&g_init_lock);
  attach_chained(get_export_table, callbacks);
  for (const Slot& s : kSlots)
    if (NvtxFunctionPointer* slot = slot_address(callbacks, s)) *slot = s.ours;
  auto version = static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version && version->struct_size >= sizeof(NvtxExportTableVersionInfo) && version->SetInjectionNvtxVersion)
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  pthread_mutex_unlock(&g_init_lock);
  return 1;
}
