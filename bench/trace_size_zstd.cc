// Recompresses the chunks of an .mtrace file with other zstd settings and reports the file size and the
// compression CPU time each would give, so that bench/trace_size can compare the writer's settings
// (preload/record/trace_writer.cc) on the same records. A measurement, not a test.
//
//   trace_size_zstd FILE.mtrace
// For every setting it prints one line: name, compressed bytes (header included), bytes per event, and
// the CPU time (CLOCK_PROCESS_CPUTIME_ID) spent compressing, per event, best of 5 passes.
// The settings:
//   chunked L       every chunk of FILE an independent frame with checksum at level L, as the writer does;
//   chunked L mmN   the same with ZSTD_c_minMatch N (shorter matches: the records are small binary fields);
//   merged-K L      every K consecutive chunks as one frame: what a K times longer flush interval gives;
//   one-frame L     all records in one frame: the bound on what chunking costs (not a valid trace layout).
#include <time.h>
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trace_format.h"

namespace {

struct Trace {
  std::vector<std::string> chunks;  // decompressed record bytes of each frame, in file order
  uint64_t events = 0;              // Record.event members (field 5) over all chunks
};

uint64_t read_varint(const std::string& s, size_t* i) {
  uint64_t v = 0;
  for (int shift = 0; *i < s.size() && shift < 64; shift += 7) {
    uint8_t b = static_cast<uint8_t>(s[(*i)++]);
    v |= uint64_t{b & 0x7fu} << shift;
    if (b < 0x80) return v;
  }
  return v;
}

uint64_t count_events(const std::string& records) {
  uint64_t events = 0;
  size_t i = 0;
  while (i < records.size()) {
    uint64_t length = read_varint(records, &i);
    size_t body = i;
    if (length > 0 && (read_varint(records, &body) >> 3) == 5) events++;
    i += length;
  }
  return events;
}

bool load(const char* path, Trace* out) {
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return false;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(file.data());
  size_t left = file.size();
  while (left > 0) {
    size_t frame = ZSTD_findFrameCompressedSize(p, left);
    if (ZSTD_isError(frame)) return false;
    uint32_t magic = left >= 4 ? (p[0] | p[1] << 8 | p[2] << 16 | uint32_t{p[3]} << 24) : 0;
    bool skippable = (magic & memtrace::kSkippableMagicMask) == memtrace::kHeaderFrameMagic;  // the header frame
    if (!skippable) {
      unsigned long long size = ZSTD_getFrameContentSize(p, frame);
      if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) return false;
      std::string chunk(size, '\0');
      if (ZSTD_isError(ZSTD_decompress(chunk.data(), size, p, frame))) return false;
      out->events += count_events(chunk);
      out->chunks.push_back(std::move(chunk));
    }
    p += frame;
    left -= frame;
  }
  return true;
}

uint64_t cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

struct Setting {
  int level;
  int min_match;  // 0 = the level's default
  size_t merge;   // consecutive chunks per frame; 0 = all in one
};

std::string name_of(const Setting& s) {
  std::string name = s.merge == 0 ? "one-frame" : s.merge == 1 ? "chunked" : "merged-" + std::to_string(s.merge);
  name += " " + std::to_string(s.level);
  if (s.min_match) name += " mm" + std::to_string(s.min_match);
  return name;
}

// Compressed bytes of the chunks as frames under `s`, and the best CPU time of 5 passes.
void measure(const Trace& t, const Setting& s, uint64_t* bytes, uint64_t* best_ns) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, s.level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  if (s.min_match) ZSTD_CCtx_setParameter(cctx, ZSTD_c_minMatch, s.min_match);
  std::vector<std::string> inputs;
  for (size_t i = 0; i < t.chunks.size(); i++) {
    if (s.merge == 0 ? i == 0 : i % s.merge == 0) inputs.emplace_back();
    inputs.back() += t.chunks[i];
  }
  std::vector<char> frame;
  *best_ns = UINT64_MAX;
  for (int pass = 0; pass < 5; pass++) {
    uint64_t total = 24;  // the file header (skippable frame)
    uint64_t start = cpu_ns();
    for (const std::string& in : inputs) {
      frame.resize(ZSTD_compressBound(in.size()));
      size_t z = ZSTD_compress2(cctx, frame.data(), frame.size(), in.data(), in.size());
      total += ZSTD_isError(z) ? 0 : z;
    }
    uint64_t spent = cpu_ns() - start;
    if (spent < *best_ns) *best_ns = spent;
    *bytes = total;
  }
  ZSTD_freeCCtx(cctx);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_size_zstd FILE.mtrace\n");
    return 2;
  }
  Trace t;
  if (!load(argv[1], &t) || t.events == 0) {
    std::fprintf(stderr, "trace_size_zstd: %s: not a readable trace with events\n", argv[1]);
    return 1;
  }
  uint64_t raw = 0;
  for (const std::string& c : t.chunks) raw += c.size();
  std::printf("%-14s %12s %10s %14s   (%zu chunks, %llu events, %.1f record bytes per event)\n", "setting", "bytes",
              "B/event", "cpu_ns/event", t.chunks.size(), static_cast<unsigned long long>(t.events),
              static_cast<double>(raw) / static_cast<double>(t.events));
  const Setting settings[] = {{1, 0, 1}, {3, 0, 1}, {4, 0, 1}, {5, 0, 1}, {6, 0, 1}, {9, 0, 1}, {19, 0, 1}, {1, 3, 1},
                              {3, 3, 1}, {5, 3, 1}, {3, 0, 5}, {3, 3, 5}, {3, 0, 0}, {9, 0, 0}, {19, 0, 0}};
  for (const Setting& s : settings) {
    uint64_t bytes = 0, ns = 0;
    measure(t, s, &bytes, &ns);
    std::printf("%-14s %12llu %10.2f %14.1f\n", name_of(s).c_str(), static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / static_cast<double>(t.events),
                static_cast<double>(ns) / static_cast<double>(t.events));
  }
  return 0;
}
