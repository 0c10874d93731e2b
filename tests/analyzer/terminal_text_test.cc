// Text from a trace on the terminal: terminal_safe() itself, and the text reports of a trace whose strings hold
// escape sequences and line breaks (nothing of them reaches the terminal raw) next to its --json (which keeps them
// exactly).
#include <gtest/gtest.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis_trace.h"
#include "oom_test_events.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

using namespace std::string_literals;

TEST(TerminalSafe, ShowsControlCharactersVisibly) {
  EXPECT_EQ(terminal_safe("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
  EXPECT_EQ(terminal_safe("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(terminal_safe("a\r\nb\tc"), "a\\r\\nb\\tc");
  EXPECT_EQ(terminal_safe("del\x7f"), "del\\x7f");
  EXPECT_EQ(terminal_safe("nul\0end"s), "nul\\x00end");
  EXPECT_EQ(terminal_safe("\x01\x1f"), "\\x01\\x1f");
}

TEST(TerminalSafe, ShowsC1ControlsAndBidiOverridesAsCodePoints) {
  EXPECT_EQ(terminal_safe("\xc2\x9b"
                          "2J"),
            "\\u009b2J");                                          // U+009B, CSI
  EXPECT_EQ(terminal_safe("\xc2\x80\xc2\x9f"), "\\u0080\\u009f");  // the first and last C1 controls
  EXPECT_EQ(terminal_safe("ab\xe2\x80\xae"
                          "cd"),
            "ab\\u202ecd");  // U+202E RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(terminal_safe("\xe2\x81\xa6"
                          "x"
                          "\xe2\x81\xa9"),
            "\\u2066x\\u2069");
}

TEST(TerminalSafe, EscapesBackslashesSoThatEscapesCannotBeForged) {
  // The text "\x1b" (backslash, x, 1, b) must read differently from an escaped ESC byte.
  EXPECT_EQ(terminal_safe("C:\\x1b"), "C:\\\\x1b");
  EXPECT_NE(terminal_safe("\\x1b"), terminal_safe("\x1b"));
  EXPECT_EQ(terminal_safe("\\"), "\\\\");
}

TEST(TerminalSafe, LeavesPrintableUtf8Alone) {
  const std::string printable = "train.py <module> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82 \xc2\xa0|~";
  EXPECT_EQ(terminal_safe(printable), printable);
  EXPECT_EQ(terminal_safe(""), "");
}

TEST(TerminalSafe, ShowsBytesThatAreNotUtf8AsHex) {
  EXPECT_EQ(terminal_safe("\x9b"), "\\x9b");                             // a C1 control as a raw byte
  EXPECT_EQ(terminal_safe("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(terminal_safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(terminal_safe("ok\xe6\x97"), "ok\\xe6\\x97");                // cut short
  EXPECT_EQ(terminal_safe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
}

// The hostile strings: an OSC window-title change ended by BEL, a clear-screen CSI, CR and LF that would forge a
// report line, and U+009B (CSI as one C1 character).
const std::string kTitle = "\x1b]0;pwned\x07";
const std::string kClear = "\x1b[2J";
const std::string kForged = "\r\n  all good";
const std::string kCsi = "\xc2\x9b";

// One stack (id 10): a native frame in a module whose path holds escapes, then a Python frame whose file and
// function hold them. One 1 MiB cudaMalloc on it stays live to the end (a leak candidate), and one cudaMalloc of 100
// MiB fails on it.
std::string hostile_trace_file() {
  test::TraceBuilder b;
  proto::Record start;
  start.mutable_start()->set_pid(4242);
  start.mutable_start()->set_start_monotonic_ns(1'000'000'000);
  start.mutable_start()->set_hostname("host" + kTitle);
  start.mutable_start()->add_argv("python" + kClear);
  start.mutable_start()->add_argv(kForged + kCsi);
  b.record(start);
  proto::Record module;
  module.mutable_module()->set_path("/nonexistent/lib" + kClear + "evil.so");
  module.mutable_module()->set_load_address(0x10000);
  module.mutable_module()->set_start(0x11000);
  module.mutable_module()->set_end(0x20000);
  b.record(module);
  b.python_frame(1, "train" + kTitle + ".py", "step" + kForged + kCsi, 42);
  b.stack(10, {0x11123, test::kPy | 1});
  b.notice(proto::Notice::TORCH_HOOK_MISSING, "hook" + kTitle + kForged);
  b.event(test::driver_alloc(0, 0x100000, test::kMiB, 1'000'000, 10));
  b.event(test::oom::cuda_malloc_oom(0, 100 * test::kMiB, 0, 64 * test::kMiB, 1'000'000, 10));
  b.end_chunk();
  std::string path = test::temp_path("hostile-strings.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

// Whether `text` holds a byte a terminal acts on: a C0 control other than LF (the report's own line ends), DEL,
// or U+0080..U+009F in UTF-8.
bool has_raw_control(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return true;
  }
  return false;
}

TEST(TerminalSafe, TextReportsShowTheTracesStringsEscaped) {
  const std::string path = hostile_trace_file();
  const std::string process_line =
      "  process: pid 4242 on host\\x1b]0;pwned\\x07, python\\x1b[2J \\r\\n  all good\\u009b\n";
  // Folded (site_lines.h): the Python frame, then the native line naming the module.
  const std::string frames =
      "    > train\\x1b]0;pwned\\x07.py:42 step\\r\\n  all good\\u009b\n"
      "      native: in lib\\x1b[2Jevil.so (1 frame, not symbolized on this machine; --all-frames shows them)\n";
  const std::string notice = "  notice TORCH_HOOK_MISSING: hook\\x1b]0;pwned\\x07\\r\\n  all good\n";
  for (const char* command : {"summary", "leaks", "oom"}) {
    SCOPED_TRACE(command);
    const std::string text = test::memtrace_stdout(std::string(command) + " " + path);
    EXPECT_FALSE(has_raw_control(text)) << text;
    EXPECT_NE(text.find(process_line), std::string::npos) << text;
    EXPECT_NE(text.find(frames), std::string::npos) << text;
  }
  EXPECT_NE(test::memtrace_stdout("summary " + path).find(notice), std::string::npos);
  // --all-frames prints each frame on its own line the same way.
  const std::string all = test::memtrace_stdout("leaks --all-frames " + path);
  EXPECT_FALSE(has_raw_control(all)) << all;
  EXPECT_NE(all.find("      lib\\x1b[2Jevil.so+0x1123 /nonexistent/lib\\x1b[2Jevil.so\n"
                     "      train\\x1b]0;pwned\\x07.py:42 step\\r\\n  all good\\u009b\n"),
            std::string::npos)
      << all;
}

TEST(TerminalSafe, JsonKeepsTheTracesStringsExactly) {
  const std::string path = hostile_trace_file();
  const nlohmann::json summary = nlohmann::json::parse(test::memtrace_stdout("summary --json " + path));
  EXPECT_EQ(summary["trace"]["hostname"], "host" + kTitle);
  EXPECT_EQ(summary["trace"]["argv"], nlohmann::json::array({"python" + kClear, kForged + kCsi}));
  EXPECT_EQ(summary["trace"]["notices"][0]["message"], "hook" + kTitle + kForged);
  const nlohmann::json frames = summary["leaks"][0]["frames"];
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0]["module"], "lib" + kClear + "evil.so");
  EXPECT_EQ(frames[0]["file"], "/nonexistent/lib" + kClear + "evil.so");
  EXPECT_EQ(frames[1]["file"], "train" + kTitle + ".py");
  EXPECT_EQ(frames[1]["function"], "step" + kForged + kCsi);
  const nlohmann::json oom = nlohmann::json::parse(test::memtrace_stdout("oom --json " + path));
  EXPECT_EQ(oom["trace"]["hostname"], "host" + kTitle);
}

TEST(TerminalSafe, JsonTextWritesDelC1AndBidiAsUnicodeEscapes) {
  // JSON escapes U+0000..U+001F itself; the rest a terminal acts on is escaped here, inside strings only.
  EXPECT_EQ(json_terminal_safe("{\"a\": \"x\x7f\xc2\x9b\xe2\x80\xae\xe2\x81\xa9y\"}"),
            "{\"a\": \"x\\u007f\\u009b\\u202e\\u2069y\"}");
  const std::string printable = "{\"f\": \"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x99\x82 \xc2\xa0\"}";
  EXPECT_EQ(json_terminal_safe(printable), printable);
  // The same document once parsed.
  const std::string text = nlohmann::json({{"s", "a\x7f\xc2\x85\xe2\x80\xaa"}}).dump();
  EXPECT_EQ(nlohmann::json::parse(json_terminal_safe(text)), nlohmann::json::parse(text));
}

TEST(TerminalSafe, JsonReportsHoldNoRawControlCharacters) {
  const std::string path = hostile_trace_file();
  for (const char* command : {"summary --json", "leaks --json", "oom --json"}) {
    SCOPED_TRACE(command);
    const std::string text = test::memtrace_stdout(std::string(command) + " " + path);
    EXPECT_FALSE(has_raw_control(text)) << text;
    EXPECT_NE(text.find("\\u009b"), std::string::npos);  // the CSI of argv and of the Python function
  }
}

TEST(TerminalSafe, ErrorLinesShowTheFileNameEscaped) {
  // A file that arrives under a name holding an escape sequence and a line break: one line, written out.
  const std::string path = test::temp_path("bad\x1b[31m\n.mtrace");
  test::write_file(path, "MEM");
  const std::string err = test::temp_path("bad-name.err");
  ASSERT_NE(std::system(("'" + std::string(MEMTRACE_BIN) + "' summary '" + path + "' 2>'" + err + "'").c_str()), 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text,
            "memtrace: " + terminal_safe(path) + ": not a memtrace trace: no memtrace header frame (at byte 0)\n");
  EXPECT_NE(text.find("bad\\x1b[31m\\n.mtrace"), std::string::npos) << text;
}

}  // namespace
}  // namespace memtrace
