/* The PythonLayout fields (preload/stacks/python_frames.h) as one list, shared by layout_check_offsets.c (which
 * computes each with offsetof() from a CPython version's internal headers) and layout_check.cc (which
 * compares them with what the reader uses). Plain C so that the C side needs no C++ header. */
#ifndef MEMTRACE_TESTS_PYTHON_LAYOUT_FIELDS_H
#define MEMTRACE_TESTS_PYTHON_LAYOUT_FIELDS_H
#include <stdint.h>

#define MEMTRACE_LAYOUT_FIELDS(X)                                                                     \
  X(minor_version) X(tstate_cframe) X(cframe_current_frame) X(tstate_current_frame) X(frame_code)     \
  X(frame_previous) X(frame_instr) X(frame_owner) X(frame_is_entry) X(owner_generator) X(owner_cstack) \
  X(code_filename) X(code_qualname) X(code_linetable) X(code_firstlineno) X(code_firsttraceable)       \
  X(code_code_adaptive) X(code_version) X(object_type) X(bytes_size) X(bytes_data) X(unicode_length) X(unicode_state)  \
  X(unicode_ascii_size) X(unicode_utf8_length) X(unicode_utf8) X(unicode_compact_mask)                \
  X(unicode_ascii_mask) X(runtime_finalizing)

#define MEMTRACE_DECLARE_FIELD(name) int64_t name;
struct ExpectedLayout {
  MEMTRACE_LAYOUT_FIELDS(MEMTRACE_DECLARE_FIELD)
};
#undef MEMTRACE_DECLARE_FIELD

#ifdef __cplusplus
extern "C"
#endif
    /* Fills `out` from the headers this program was compiled against; -1 for fields the version lacks. */
    void expected_layout(struct ExpectedLayout* out);

#endif
