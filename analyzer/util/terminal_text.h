// Text from a trace made safe to print on a terminal. A trace is written by whatever process was traced (and can
// be edited by anyone): its host name, command line, Python file and function names, module paths and notice
// messages are the traced program's bytes. Printed raw, an escape sequence in them would retitle the window,
// clear the screen or move the cursor, and a CR or LF would forge report lines. The text reports pass every such
// string through terminal_safe(); --json needs no such step (JSON escapes control characters itself).
#pragma once

#include <string>
#include <string_view>

namespace memtrace {

// `text` with every character a terminal would act on instead of showing written out visibly, and printable
// UTF-8 (any language, emoji) unchanged:
//   - C0 controls and DEL: "\t", "\n", "\r" by name, the others as "\x1b", "\x07", "\x7f" (two lower-case hex
//     digits);
//   - C1 controls U+0080..U+009F (which some terminals take as ESC [ and the like) as "\u009b";
//   - the bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069), which reorder what follows them
//     on the line, as "\u202e";
//   - a byte that is not part of valid UTF-8 as "\xff";
//   - a backslash as "\\", so that text that already reads "\x1b" cannot pass for an escaped control.
// The result is at most 4 bytes per input byte ("\x1b" stands for 1 byte, "\u009b" for 2).
std::string terminal_safe(std::string_view text);

// JSON text (valid UTF-8, as nlohmann::json::dump writes it with error_handler_t::replace) with the characters a
// terminal acts on that JSON leaves raw written as \u escapes too: DEL, the C1 controls and the bidirectional
// overrides and isolates (JSON escapes only U+0000..U+001F itself). They occur only inside JSON strings, so the
// result decodes to the same document: `memtrace summary --json` shown with `cat` cannot drive the terminal.
std::string json_terminal_safe(std::string_view json_text);

}  // namespace memtrace
