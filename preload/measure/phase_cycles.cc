// See phase_cycles.h. Compiled only with MEMTRACE_PHASE_CYCLES.
#include "measure/phase_cycles.h"

#include <x86intrin.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "record/tls.h"

namespace memtrace::phase_cycles {
namespace {

const char* const kPhaseNames[kPhaseCount] = {"outside (job's own work since the last event)",
                                              "started + device noted",
                                              "stack captured",
                                              "lock taken",
                                              "event encoded and appended",
                                              "lock released",
                                              "forwarded to libc10"};

// One slot per thread that marks, written by that thread only (no atomics on the counted path); the report at
// exit adds them up. Threads past the last slot are not counted.
struct Slot {
  uint64_t sums[kPhaseCount];
  uint64_t events;  // events that reached kForwarded
  uint64_t unwinds, unwound_frames;
  uint64_t last;  // the thread's previous mark
  bool in_hook;   // between kEnter and kForwarded: the other hooks' events (and the writer thread's
                  // samples) record without a kEnter and are not counted
};
constexpr int kSlots = 256;
Slot g_slots[kSlots];
std::atomic<int> g_slots_used{0};
std::atomic<bool> g_started{false};
uint64_t g_first_tsc = 0;
timespec g_first_time{};
MEMTRACE_TLS Slot* t_slot = nullptr;
MEMTRACE_TLS bool t_no_slot = false;

double ns_between(const timespec& a, const timespec& b) {
  return double(b.tv_sec - a.tv_sec) * 1e9 + double(b.tv_nsec - a.tv_nsec);
}

void report() {
  Slot total{};
  int threads = 0, used = g_slots_used.load();
  for (int i = 0; i < used && i < kSlots; i++) {
    const Slot& s = g_slots[i];
    if (s.events) threads++;
    for (int p = 0; p < kPhaseCount; p++) total.sums[p] += s.sums[p];
    total.events += s.events;
    total.unwinds += s.unwinds;
    total.unwound_frames += s.unwound_frames;
  }
  if (!total.events) return;
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double cycles_per_ns = double(__rdtsc() - g_first_tsc) / ns_between(g_first_time, now);
  double n = double(total.events);
  uint64_t inside = 0;
  for (int p = kStarted; p < kPhaseCount; p++) inside += total.sums[p];
  fprintf(stderr, "memtrace phase cycles: %llu events on %d threads, TSC at %.3f GHz\n",
          (unsigned long long)total.events, threads, cycles_per_ns);
  for (int p = 0; p < kPhaseCount; p++)
    fprintf(stderr, "  %-48s %9.1f cycles %8.1f ns\n", kPhaseNames[p], total.sums[p] / n,
            total.sums[p] / n / cycles_per_ns);
  fprintf(stderr, "  %-48s %9.1f cycles %8.1f ns\n", "in the hook, all phases", inside / n, inside / n / cycles_per_ns);
  if (total.unwinds)
    fprintf(stderr, "  native unwinds: %llu, %.1f frames each (ours included)\n", (unsigned long long)total.unwinds,
            double(total.unwound_frames) / double(total.unwinds));
}

Slot* slot() {
  if (t_slot || t_no_slot) return t_slot;
  if (!g_started.exchange(true)) {
    g_first_tsc = __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &g_first_time);
    atexit(report);
  }
  int i = g_slots_used.fetch_add(1);
  if (i >= kSlots) {
    t_no_slot = true;
    return nullptr;
  }
  t_slot = &g_slots[i];
  t_slot->last = __rdtsc();  // the thread's first stretch has no start: counted from here
  return t_slot;
}

}  // namespace

void mark(Phase phase) {
  Slot* s = slot();
  if (!s) return;
  if (phase == kEnter) {
    s->in_hook = true;
  } else if (!s->in_hook) {
    return;
  }
  uint64_t now = __rdtsc();
  // kEnter closes the "outside" stretch, which needs an event before it.
  if (phase != kEnter || s->events) s->sums[phase] += now - s->last;
  s->last = now;
  if (phase == kForwarded) {
    s->events++;
    s->in_hook = false;
  }
}

void count_native_frames(int frames) {
  if (Slot* s = slot(); s && s->in_hook) {
    s->unwinds++;
    s->unwound_frames += uint64_t(frames);
  }
}

bool skip_record() {
  static const bool skip = [] {
    const char* s = getenv("MEMTRACE_PHASE_SKIP_RECORD");
    return s && s[0] == '1';
  }();
  return skip;
}

}  // namespace memtrace::phase_cycles
