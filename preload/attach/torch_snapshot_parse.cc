// The text the snapshot snippet (torch_snapshot.cc) answers with, parsed into live entries and device baselines.
// One record per line, numbers in decimal:
//   A BACKEND                                   torch.cuda.get_allocator_backend(): native or cudaMallocAsync
//   S DEVICE ADDRESS TOTAL_SIZE STREAM EXPANDABLE   a segment (EXPANDABLE 0 or 1)
//   B DEVICE ADDRESS SIZE STREAM                a block in state active_allocated
//   D DEVICE FREE TOTAL ALLOCATED RESERVED      per device with a context: mem_get_info, memory_allocated/_reserved
//   W TEXT                                      the listing is incomplete (TEXT says how)
//   E TEXT                                      no snapshot (TEXT says why)
// Devices without a primary context are skipped: mem_get_info would create one.
#include "attach/torch_snapshot.h"

#include <cstdio>
#include <cstring>

namespace memtrace {
namespace {

// The next whitespace-separated number of a line; false at its end.
bool next_number(const char** p, const char* end, uint64_t* value) {
  while (*p < end && **p == ' ') ++*p;
  if (*p >= end || **p < '0' || **p > '9') return false;
  uint64_t v = 0;
  while (*p < end && **p >= '0' && **p <= '9') v = v * 10 + static_cast<uint64_t>(*(*p)++ - '0');
  *value = v;
  return true;
}

// Reads `count` numbers of the line [p, end); false when it has fewer.
bool numbers(const char* p, const char* end, uint64_t* out, int count) {
  for (int i = 0; i < count; i++)
    if (!next_number(&p, end, &out[i])) return false;
  return true;
}

// One line of text into `why` (keeps the first).
void note(char* why, size_t why_size, const char* text, size_t length) {
  if (why_size == 0 || why[0]) return;
  snprintf(why, why_size, "%.*s", static_cast<int>(length), text);
}

// Pass 1 lists the live entries, pass 2 the device baselines (AttachBaseline comes after LiveAtAttach).
void parse_pass(int pass, const char* text, size_t size, const SnapshotSink& sink, bool* complete, char* why,
                size_t why_size) {
  bool async_backend = false;
  const char* end = text + size;
  for (const char* line = text; line < end;) {
    const char* stop = static_cast<const char*>(memchr(line, '\n', static_cast<size_t>(end - line)));
    if (!stop) stop = end;
    uint64_t v[5] = {};
    char kind = *line;
    const char* rest = line + 1;
    if (kind == 'A') {
      async_backend = static_cast<size_t>(stop - rest) > 1 && strncmp(rest + 1, "cudaMallocAsync", 15) == 0;
    } else if (kind == 'S' && pass == 1 && numbers(rest, stop, v, 5)) {
      LiveEntry e;
      e.layer = Layer::kDriver;
      e.api = v[4] ? Api::kUnknown : Api::kCuMemAlloc;
      e.device = static_cast<int32_t>(v[0]);
      e.address = v[1];
      e.size = v[2];
      e.stream = v[3];
      e.expandable_segment = v[4] != 0;
      e.torch_segment = true;
      sink.live(e, sink.context);
    } else if (kind == 'B' && pass == 1 && numbers(rest, stop, v, 4)) {
      LiveEntry e;
      e.layer = Layer::kBlock;
      e.api = Api::kTorchAllocator;
      e.device = static_cast<int32_t>(v[0]);
      e.address = v[1];
      e.size = v[2];
      e.stream = v[3];
      sink.live(e, sink.context);
    } else if (kind == 'D' && numbers(rest, stop, v, 5)) {
      if (pass == 1 && async_backend && v[3] != 0) {
        LiveEntry e;
        e.layer = Layer::kBlock;
        e.api = Api::kCuMemAllocAsync;
        e.device = static_cast<int32_t>(v[0]);
        e.size = v[3];
        e.blocks_unknown = true;
        sink.live(e, sink.context);
        *complete = false;
        const char* text = "the cudaMallocAsync backend lists no blocks: its allocated bytes are blocks_unknown";
        note(why, why_size, text, strlen(text));
      } else if (pass == 2) {
        DeviceBaseline b;
        b.device = static_cast<int32_t>(v[0]);
        b.device_free_bytes = v[1];
        b.device_total_bytes = v[2];
        b.has_allocator_totals = true;
        b.allocator_allocated_bytes = v[3];
        b.allocator_reserved_bytes = v[4];
        sink.device(b, sink.context);
      }
    } else if ((kind == 'W' || kind == 'E') && pass == 1) {
      *complete = false;
      if (rest < stop && *rest == ' ') rest++;
      note(why, why_size, rest, static_cast<size_t>(stop - rest));
    }
    line = stop + 1;
  }
}

}  // namespace

bool torch_snapshot_parse(const char* text, size_t size, const SnapshotSink& sink, char* why, size_t why_size) {
  bool complete = true;
  parse_pass(1, text, size, sink, &complete, why, why_size);
  parse_pass(2, text, size, sink, &complete, why, why_size);
  return complete;
}

}  // namespace memtrace
