#include "record/config.h"

#include <errno.h>

#include <strings.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memtrace {
namespace {

// A bad value is not fatal (the job must run), but it is said once rather than silently replaced. `*given`
// (where asked for) is true only when the variable held a value that is used: a bad one counts as unset.
uint64_t env_uint(const char* name, uint64_t fallback, uint64_t min, uint64_t max, bool* given = nullptr) {
  if (given) *given = false;
  const char* s = getenv(name);
  if (!s || !*s) return fallback;
  // Digits only: strtoull by itself would also take leading blanks, a '+' and a '-' (which it wraps).
  const size_t digits = strspn(s, "0123456789");
  errno = 0;
  unsigned long long v = strtoull(s, nullptr, 10);
  if (s[digits] != '\0' || errno != 0 || v < min || v > max) {
    fprintf(stderr, "memtrace: %s=\"%s\" is not a whole number from %llu to %llu; using %llu\n", name, s,
            static_cast<unsigned long long>(min), static_cast<unsigned long long>(max),
            static_cast<unsigned long long>(fallback));
    return fallback;
  }
  if (given) *given = true;
  return v;
}

// The spellings of a boolean setting that a user writes in shell scripts and YAML alike.
constexpr const char* kTrueWords[] = {"1", "true", "yes", "on"};
constexpr const char* kFalseWords[] = {"0", "false", "no", "off"};

bool is_one_of(const char* s, const char* const (&words)[4]) {
  for (const char* word : words)
    if (strcasecmp(s, word) == 0) return true;
  return false;
}

// A launcher's number (RANK, LOCAL_RANK, WORLD_SIZE): digits only, below 2^32; kNoJobNumber otherwise.
int64_t job_number(const char* name) {
  const char* s = getenv(name);
  if (!s || !*s || s[strspn(s, "0123456789")] != '\0' || strlen(s) > 10) return kNoJobNumber;
  const unsigned long long v = strtoull(s, nullptr, 10);
  return v <= UINT32_MAX ? static_cast<int64_t>(v) : kNoJobNumber;
}

// The job id and the variable it came from: SLURM_JOB_ID, else TORCHELASTIC_RUN_ID (JobIdSource in schema.h).
void read_job_id(Config* out) {
  const char* names[] = {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"};
  const JobIdSource sources[] = {JobIdSource::kSlurmJobId, JobIdSource::kTorchelasticRunId};
  out->job_id[0] = '\0';
  out->job_id_source = JobIdSource::kNone;
  for (int i = 0; i < 2; i++) {
    const char* s = getenv(names[i]);
    if (!s || !*s) continue;
    size_t n = strnlen(s, sizeof out->job_id - 1);
    // Cut inside a UTF-8 character: back to its first byte (the analyzer's runtime reads the field as UTF-8).
    if (s[n] != '\0')
      while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) n--;
    memcpy(out->job_id, s, n);
    out->job_id[n] = '\0';
    out->job_id_source = sources[i];
    return;
  }
}

bool append(char*& out, char* end, const char* s, size_t n) {
  if (static_cast<size_t>(end - out) <= n) return false;
  memcpy(out, s, n);
  out += n;
  return true;
}

}  // namespace

bool config_bool(const char* name, bool unset_value, bool unreadable_value, const char* because) {
  const char* s = getenv(name);
  if (!s || !*s) return unset_value;
  if (is_one_of(s, kTrueWords)) return true;
  if (is_one_of(s, kFalseWords)) return false;
  fprintf(stderr, "memtrace: %s=\"%s\" is not 1/0, true/false, yes/no or on/off; using %d%s%s%s\n", name, s,
          unreadable_value ? 1 : 0, because ? " (" : "", because ? because : "", because ? ")" : "");
  return unreadable_value;
}

bool config_expand_output(const char* pattern, int pid, const char* host, char* out, size_t out_size) {
  char* cur = out;
  char* end = out + out_size;
  char number[32];
  for (const char* p = pattern; *p; p++) {
    bool fits = true;
    if (p[0] == '%' && p[1] != '\0') {
      switch (*++p) {
        case 'p': {
          int n = snprintf(number, sizeof number, "%d", pid);
          fits = append(cur, end, number, n);
          break;
        }
        case 'h': fits = append(cur, end, host, strlen(host)); break;
        case 'r': {
          const char* rank = getenv("RANK");
          if (!rank || !*rank) rank = getenv("LOCAL_RANK");
          if (!rank || !*rank) rank = "0";
          fits = append(cur, end, rank, strlen(rank));
          break;
        }
        case '%': fits = append(cur, end, "%", 1); break;
        default: fits = append(cur, end, p - 1, 2); break;
      }
    } else {
      fits = append(cur, end, p, 1);
    }
    if (!fits) return false;
  }
  *cur = '\0';
  return true;
}

void config_load(Config* out) {
  const char* pattern = getenv("MEMTRACE_OUTPUT");
  if (!pattern || !*pattern) pattern = "memtrace-%h-%p.mtrace";
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  if (!config_expand_output(pattern, getpid(), host, out->output_path, sizeof out->output_path)) {
    snprintf(out->output_path, sizeof out->output_path, "memtrace-%d.mtrace", getpid());
    fprintf(stderr, "memtrace: MEMTRACE_OUTPUT is longer than %zu bytes once expanded; using %s\n",
            sizeof out->output_path - 1, out->output_path);
  }
  out->flush_interval_ms = static_cast<uint32_t>(env_uint("MEMTRACE_FLUSH_MS", 200, 1, 60000));
  bool max_frames_given = false;
  out->max_native_frames =
      static_cast<uint32_t>(env_uint("MEMTRACE_MAX_FRAMES", kDefaultMaxNativeFrames, 0, 256, &max_frames_given));
  // A depth asked for with MEMTRACE_MAX_FRAMES applies to every thread unless the Python threads' own is given;
  // a bad MEMTRACE_MAX_FRAMES, replaced by its default, leaves the Python threads' default too.
  const uint64_t python_default = max_frames_given ? out->max_native_frames : kDefaultMaxNativeFramesWithPython;
  out->max_native_frames_python = static_cast<uint32_t>(env_uint("MEMTRACE_MAX_FRAMES_PYTHON", python_default, 0, 256));
  out->python_frames = config_bool("MEMTRACE_PYTHON_FRAMES", true, true);
  out->buffer_bytes = static_cast<size_t>(env_uint("MEMTRACE_BUFFER_MB", 8, 1, 4096)) << 20;
  out->quiet = config_bool("MEMTRACE_QUIET", false, false);
  // A value that is not a boolean still says the user meant to set this one, and the only setting they would
  // set is 1: recording the command line they wanted kept out of the file would be the worse mistake.
  out->redact_args = config_bool("MEMTRACE_REDACT_ARGS", false, true, "the command line is not recorded");
  const char* full = getenv("MEMTRACE_FULL_BUFFER");
  out->wait_when_full = full && strcmp(full, "wait") == 0;
  if (full && *full && !out->wait_when_full && strcmp(full, "drop") != 0)
    fprintf(stderr, "memtrace: MEMTRACE_FULL_BUFFER=\"%s\" is neither drop nor wait; using drop\n", full);
  const char* start = getenv("MEMTRACE_START");
  out->start_dormant = start && *start && strcmp(start, "now") != 0;
  if (out->start_dormant && strcmp(start, "dormant") != 0)
    fprintf(stderr,
            "memtrace: MEMTRACE_START=\"%s\" is neither now nor dormant; using dormant (no file until attach)\n",
            start);
  out->rank = job_number("RANK");
  out->local_rank = job_number("LOCAL_RANK");
  out->world_size = job_number("WORLD_SIZE");
  read_job_id(out);
}

}  // namespace memtrace
