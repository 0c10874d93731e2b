// libFuzzer target: the input is a .mtrace file. Everything `memtrace summary` does with a file must
// either work or end in a TraceError (one error line, exit 2): any other exception, a crash, a
// sanitizer report, a leak or a huge allocation is a finding.
//
// Three kinds of input, told apart by the first byte:
//   0x01, then records: the rest is the decompressed content of one chunk (varint-length-delimited
//     Records); the harness wraps it in a valid header (format version 1) and a checksummed zstd frame,
//     so that mutations reach the record parser and the analysis instead of failing the chunk's checksum;
//   0x03, then records: the same in a version-3 header, where Events carry their sticky fields over
//     and leave allocator totals to be derived;
//   anything else: the whole file as is (header, frames, checksums: the reader's own checks).
//
// Symbolization is left out on purpose: it opens the module files a trace names, and a fuzzer must
// not open arbitrary paths of this machine. Modules are dropped, so native frames stay addresses.
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "analysis/analysis.h"
#include "report/json/report_json.h"
#include "report/text/report_text.h"
#include "trace_format.h"

namespace {

// The reader takes a path; an in-memory file keeps every run off the disk.
const std::string& input_path() {
  static const std::string path = [] {
    int fd = memfd_create("memtrace-fuzz-input", 0);
    if (fd < 0) std::abort();
    return "/proc/self/fd/" + std::to_string(fd);
  }();
  return path;
}

void write_input(const uint8_t* data, size_t size) {
  int fd = std::stoi(input_path().substr(input_path().rfind('/') + 1));
  if (ftruncate(fd, 0) != 0) std::abort();
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, data + done, size - done, off_t(done));
    if (n <= 0) std::abort();
    done += size_t(n);
  }
}

constexpr uint8_t kRecordsInput = 0x01;
constexpr uint8_t kVersion3RecordsInput = 0x03;

// The file a tracer would write for one chunk holding `content`: header frame (format `version`) + frame.
std::string trace_of_records(const uint8_t* content, size_t size, char version) {
  uint8_t header[memtrace::kHeaderBytes];
  memtrace::encode_header_frame(uint8_t(version), header);
  std::string file(reinterpret_cast<const char*>(header), sizeof header);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string frame(ZSTD_compressBound(size), '\0');
  size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), content, size);
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) std::abort();
  return file + frame.substr(0, n);
}

void report(const memtrace::Analysis& analysis) {
  memtrace::Symbolizer symbolizer({});
  memtrace::FrameResolver resolver(analysis.stacks, symbolizer);
  nlohmann::json json = {{"trace", memtrace::trace_json(analysis)},
                         {"devices", memtrace::devices_json(analysis, resolver)},
                         {"leaks", memtrace::leaks_json(analysis, resolver)},
                         {"ooms", memtrace::ooms_json(analysis, resolver)}};
  std::string text = json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::ostringstream out;
  memtrace::TextOptions options;
  memtrace::print_trace_overview(out, analysis);
  memtrace::print_devices(out, analysis, resolver, options);
  memtrace::print_leaks(out, analysis, resolver, options);
  memtrace::print_ooms(out, analysis, resolver, options);
  memtrace::print_health(out, analysis);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && (data[0] == kRecordsInput || data[0] == kVersion3RecordsInput)) {
    std::string file = trace_of_records(data + 1, size - 1, char(data[0]));
    write_input(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  } else {
    write_input(data, size);
  }
  try {
    report(*memtrace::analyze_trace(input_path(), /*with_live_at_peak=*/true));
  } catch (const memtrace::TraceError&) {
    // The expected outcome for a damaged file.
  }
  return 0;
}
