/* Offsets of the interpreter structures, straight from one CPython version's internal headers. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <string.h>

#include "internal/pycore_frame.h"
#include "internal/pycore_runtime.h"
#include "layout_fields.h"

/* The bit a one-bit field of PyASCIIObject.state occupies in the uint32_t the reader loads. */
#define STATE_BIT_MASK(field)                                          \
  ({                                                                   \
    PyASCIIObject object;                                              \
    uint32_t word = 0;                                                 \
    memset(&object, 0, sizeof object);                                \
    object.state.field = 1;                                            \
    memcpy(&word, (char*)&object + offsetof(PyASCIIObject, state), 4); \
    (int64_t)word;                                                     \
  })

void expected_layout(struct ExpectedLayout* out) {
  out->minor_version = PY_MINOR_VERSION;
#if PY_VERSION_HEX < 0x030D0000
  out->tstate_cframe = offsetof(PyThreadState, cframe);
  out->cframe_current_frame = offsetof(_PyCFrame, current_frame);
  out->tstate_current_frame = -1;
  out->frame_code = offsetof(_PyInterpreterFrame, f_code);
  out->frame_instr = offsetof(_PyInterpreterFrame, prev_instr);
#else
  out->tstate_cframe = -1;
  out->cframe_current_frame = -1;
  out->tstate_current_frame = offsetof(PyThreadState, current_frame);
  out->frame_code = offsetof(_PyInterpreterFrame, f_executable);
  out->frame_instr = offsetof(_PyInterpreterFrame, instr_ptr);
#endif
  out->frame_previous = offsetof(_PyInterpreterFrame, previous);
  out->frame_owner = offsetof(_PyInterpreterFrame, owner);
#if PY_VERSION_HEX < 0x030C0000
  out->frame_is_entry = offsetof(_PyInterpreterFrame, is_entry);
  out->owner_cstack = -1;
#else
  out->frame_is_entry = -1;
  out->owner_cstack = FRAME_OWNED_BY_CSTACK;
#endif
  out->owner_generator = FRAME_OWNED_BY_GENERATOR;
  out->code_filename = offsetof(PyCodeObject, co_filename);
  out->code_qualname = offsetof(PyCodeObject, co_qualname);
  out->code_linetable = offsetof(PyCodeObject, co_linetable);
  out->code_firstlineno = offsetof(PyCodeObject, co_firstlineno);
  out->code_firsttraceable = offsetof(PyCodeObject, _co_firsttraceable);
  out->code_code_adaptive = offsetof(PyCodeObject, co_code_adaptive);
#if PY_VERSION_HEX < 0x030C0000
  out->code_version = -1;
#else
  out->code_version = offsetof(PyCodeObject, co_version);
#endif
  out->object_type = offsetof(PyObject, ob_type);
  out->bytes_size = offsetof(PyVarObject, ob_size);
  out->bytes_data = offsetof(PyBytesObject, ob_sval);
  out->unicode_length = offsetof(PyASCIIObject, length);
  out->unicode_state = offsetof(PyASCIIObject, state);
  out->unicode_ascii_size = sizeof(PyASCIIObject);
  out->unicode_utf8_length = offsetof(PyCompactUnicodeObject, utf8_length);
  out->unicode_utf8 = offsetof(PyCompactUnicodeObject, utf8);
  out->unicode_compact_mask = STATE_BIT_MASK(compact);
  out->unicode_ascii_mask = STATE_BIT_MASK(ascii);
  out->runtime_finalizing = offsetof(_PyRuntimeState, _finalizing);
}
