#include "record/trace_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
// ZSTD_initStaticCCtx and ZSTD_estimateCCtxSize_usingCCtxParams: zstd's "static linking only" API, exported by
// libzstd.so.1 all the same.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "trace_format.h"

namespace memtrace {
namespace {

class FileSink final : public Sink {
 public:
  explicit FileSink(int fd) : fd_(fd) {}
  ~FileSink() override { close(fd_); }
  bool write(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

 private:
  int fd_;
};

class NullSink final : public Sink {
 public:
  bool write(const void*, size_t) override { return true; }
};

// The thread's state lives outside TraceWriter so the thread function needs no object pointer dance.
pthread_t g_thread;
bool g_thread_running = false;
pthread_mutex_t g_wake_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wake_cond;
bool g_wake_requested = false;
bool g_stop_requested = false;
void (*g_flush)() = nullptr;
uint32_t g_interval_ms = 200;

void* writer_main(void*) {
  // Block every signal: the job's signal handlers must run on its own threads, not on ours.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_setname_np(pthread_self(), "memtrace-writer");
  pthread_mutex_lock(&g_wake_lock);
  while (!g_stop_requested) {
    if (!g_wake_requested) {
      timespec deadline;
      clock_gettime(CLOCK_MONOTONIC, &deadline);
      deadline.tv_sec += g_interval_ms / 1000;
      deadline.tv_nsec += static_cast<long>(g_interval_ms % 1000) * 1000000L;
      if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&g_wake_cond, &g_wake_lock, &deadline);
    }
    g_wake_requested = false;
    bool stop = g_stop_requested;
    pthread_mutex_unlock(&g_wake_lock);
    if (!stop) g_flush();
    pthread_mutex_lock(&g_wake_lock);
  }
  pthread_mutex_unlock(&g_wake_lock);
  return nullptr;
}

}  // namespace

bool sink_alternative_name(const char* path, int i, char* out, size_t out_size) {
  static const char kExtension[] = ".mtrace";
  size_t len = strlen(path);
  size_t ext = sizeof kExtension - 1;
  bool has_extension = len > ext && strcmp(path + len - ext, kExtension) == 0;
  int stem = static_cast<int>(has_extension ? len - ext : len);
  int n = snprintf(out, out_size, "%.*s.%d%s", stem, path, i, has_extension ? kExtension : "");
  return n > 0 && static_cast<size_t>(n) < out_size;
}

const char* sink_refusal(const char* path) {
  if (strcmp(path, "/dev/null") == 0) return nullptr;
  struct stat st;
  if (stat(path, &st) != 0) return nullptr;  // nothing there (yet): sink_open says what goes wrong, if anything
  if (S_ISDIR(st.st_mode)) return "it is a directory (MEMTRACE_OUTPUT names the trace file)";
  if (!S_ISREG(st.st_mode))
    return "it is not a regular file (MEMTRACE_OUTPUT names the trace file; /dev/null traces without writing)";
  // /dev/stdout with the job's output redirected to a file leads to a regular file, but the trace would go to
  // "/dev/stdout.1", a new file among the devices, as it would for /dev/stderr, /dev/fd/2 or /proc/self/fd/1.
  for (int fd = 0; fd <= 2; fd++) {
    struct stat stream;
    if (fstat(fd, &stream) == 0 && stream.st_dev == st.st_dev && stream.st_ino == st.st_ino)
      return "it is the job's standard input, output or error (MEMTRACE_OUTPUT names the trace file)";
  }
  return nullptr;
}

Sink* sink_open(const char* path, char* chosen, size_t chosen_size) {
  snprintf(chosen, chosen_size, "%s", path);
  if (strcmp(path, "/dev/null") == 0) return new (std::nothrow) NullSink();
  int fd = -1;
  for (int i = 0; i < 1000; i++) {
    if (i > 0 && !sink_alternative_name(path, i, chosen, chosen_size)) break;
    // O_EXCL with O_CREAT also refuses a symlink at the name, dangling or not.
    fd = open(chosen, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) return nullptr;
  Sink* sink = new (std::nothrow) FileSink(fd);
  if (!sink) close(fd);
  return sink;
}

namespace {

// Level 3, measured by bench/trace_size on the same records (docs/performance.md, "Trace size"): on a real
// training trace levels 6 and 9 save 8% of the bytes for 3.5 and 6 times the writer's CPU, and level 1 saves 10%
// of the CPU for 4% more bytes. Most of what is left is the event times' entropy, which no compressor setting
// removes.
constexpr int kCompressionLevel = 3;

// The compression context lives in memory mapped once, here, sized for any chunk: a context made with
// ZSTD_createCCtx allocates its workspace with malloc at its first compression and again when a chunk outgrows
// it, and a chunk is compressed inside a signal handler when a job is killed or crashes. A handler that
// interrupted malloc and called it again waited forever on the arena's lock (SIGTERM hung 11 of 20 runs of a
// job that allocates in a loop). A static context never allocates: a chunk it could not compress is an error.
//
// Only from zstd 1.4.7 on (ZSTD_versionNumber() >= 10407) does ZSTD_compress2 compress in one pass with no buffers
// of its own, so that this estimate covers every chunk; before, it buffered its input (more than the estimate:
// every chunk past ~100 KB failed) and, before 1.4.5, shrank a static context after 128 small chunks and then
// refused it. With an older libzstd.so.1 (RHEL 8 and Ubuntu 20.04 ship 1.4.4) the context is an ordinary one:
// tracing works, and a signal landing in malloc can hang the handler as before.
void* make_static_cctx() {
  ZSTD_CCtx_params* params = ZSTD_createCCtxParams();
  if (!params) return nullptr;
  ZSTD_CCtxParams_setParameter(params, ZSTD_c_compressionLevel, kCompressionLevel);
  ZSTD_CCtxParams_setParameter(params, ZSTD_c_checksumFlag, 1);
  // Sized for a source of unknown length, which takes the level's largest parameters, and at least for the
  // largest of the level's source-size tiers (ZSTD_estimateCCtxSize checks each): any chunk fits.
  const size_t workspace_bytes =
      std::max(ZSTD_estimateCCtxSize_usingCCtxParams(params), ZSTD_estimateCCtxSize(kCompressionLevel));
  ZSTD_freeCCtxParams(params);
  void* workspace = mmap(nullptr, workspace_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (workspace == MAP_FAILED) return nullptr;
  ZSTD_CCtx* cctx = ZSTD_initStaticCCtx(workspace, workspace_bytes);
  if (!cctx) {
    munmap(workspace, workspace_bytes);
    return nullptr;
  }
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kCompressionLevel);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  return cctx;
}

void* make_ordinary_cctx() {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) return nullptr;
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kCompressionLevel);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  return cctx;
}

}  // namespace

bool TraceWriter::begin(Sink* sink, size_t max_chunk_bytes) {
  sink_ = sink;
  // A second trace of the process (attach after detach: docs/attach.md) reuses the context and frame buffer.
  if (!cctx_) cctx_ = ZSTD_versionNumber() >= 10407 ? make_static_cctx() : make_ordinary_cctx();
  if (!cctx_) return false;
  if (!frame_ || frame_capacity_ < ZSTD_compressBound(max_chunk_bytes)) {
    frame_capacity_ = ZSTD_compressBound(max_chunk_bytes);
    void* p = mmap(nullptr, frame_capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    frame_ = static_cast<uint8_t*>(p);
  }

  // The file header (proto/trace_format.h): a zstd skippable frame, so that the whole file is a zstd stream.
  // kTraceFormatVersion is the Event encoding of preload/record/event_encoder.h.
  uint8_t header[kHeaderBytes];
  encode_header_frame(kTraceFormatVersion, header);
  return sink_->write(header, sizeof header);
}

void TraceWriter::end() {
  delete sink_;
  sink_ = nullptr;
}

bool TraceWriter::write_chunk(const uint8_t* records, size_t n) {
  if (n == 0) return true;
  size_t z = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), frame_, frame_capacity_, records, n);
  if (ZSTD_isError(z)) return false;
  return sink_->write(frame_, z);
}

bool TraceWriter::start_thread(void (*flush)(), uint32_t interval_ms) {
  g_flush = flush;
  g_interval_ms = interval_ms;
  g_stop_requested = false;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g_wake_cond, &attr);
  pthread_condattr_destroy(&attr);
  g_thread_running = pthread_create(&g_thread, nullptr, writer_main, nullptr) == 0;
  return g_thread_running;
}

void TraceWriter::wake() {
  pthread_mutex_lock(&g_wake_lock);
  g_wake_requested = true;
  pthread_cond_signal(&g_wake_cond);
  pthread_mutex_unlock(&g_wake_lock);
}

void TraceWriter::stop_thread() {
  if (!g_thread_running) return;
  pthread_mutex_lock(&g_wake_lock);
  g_stop_requested = true;
  pthread_cond_signal(&g_wake_cond);
  pthread_mutex_unlock(&g_wake_lock);
  pthread_join(g_thread, nullptr);
  g_thread_running = false;
}

void TraceWriter::forget_thread() {
  g_thread_running = false;
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_wake_lock = fresh;
  g_wake_requested = false;
  g_stop_requested = false;
}

}  // namespace memtrace
