#include "runtime/llm/chat.h"

#include <cstring>

#include "runtime/llm/unicode.h"

namespace ember::llm {
namespace {

// The literal pieces of the two templates (tests/data/llm/*/tokenizer_config.json, and the
// released Qwen2 / Qwen2.5 / Qwen3 / Meta-Llama-3 templates, which render the same for one turn).
constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>\n";
constexpr std::string_view kLlamaBos = "<|begin_of_text|>";
constexpr std::string_view kLlamaHeaderStart = "<|start_header_id|>";
constexpr std::string_view kLlamaHeaderEnd = "<|end_header_id|>\n\n";
constexpr std::string_view kLlamaEot = "<|eot_id|>";

// Python's str.isspace() (what Jinja's trim, i.e. str.strip(), removes): category Zs or bidi class
// WS / B / S. That is Unicode White_Space plus U+001C..U+001F; U+200B and U+FEFF are not in it.
bool is_python_space(uint32_t cp) {
  if (cp <= 0x20) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

// Appends pieces to a buffer that was checked to be large enough (or counts only, when out is null).
class Writer {
 public:
  explicit Writer(char* out) : out_(out) {}
  void put(std::string_view s) {
    if (out_ != nullptr && !s.empty()) std::memcpy(out_ + size_, s.data(), s.size());
    size_ += s.size();
  }
  size_t size() const { return size_; }

 private:
  char* out_;
  size_t size_ = 0;
};

void write_chat(const ChatTemplate& chat, const ChatPrompt& prompt, Writer& w) {
  switch (chat.format) {
    case ChatFormat::None:
      w.put(prompt.user);
      return;
    case ChatFormat::ChatMl:
      if (prompt.has_system || chat.has_default_system) {
        w.put(kImStart);
        w.put("system\n");
        w.put(prompt.has_system ? prompt.system : chat.default_system);
        w.put(kImEnd);
      }
      w.put(kImStart);
      w.put("user\n");
      w.put(prompt.user);
      w.put(kImEnd);
      if (chat.generation_prompt.empty()) {
        w.put(kImStart);
        w.put("assistant\n");
      } else {
        w.put(chat.generation_prompt);
      }
      return;
    case ChatFormat::Llama3:
      w.put(kLlamaBos);
      if (prompt.has_system) {
        w.put(kLlamaHeaderStart);
        w.put("system");
        w.put(kLlamaHeaderEnd);
        w.put(trim_python_whitespace(prompt.system));
        w.put(kLlamaEot);
      }
      w.put(kLlamaHeaderStart);
      w.put("user");
      w.put(kLlamaHeaderEnd);
      w.put(trim_python_whitespace(prompt.user));
      w.put(kLlamaEot);
      w.put(kLlamaHeaderStart);
      w.put("assistant");
      w.put(kLlamaHeaderEnd);
      return;
  }
}

bool is_known(ChatFormat format) {
  return format == ChatFormat::None || format == ChatFormat::ChatMl || format == ChatFormat::Llama3;
}

}  // namespace

std::string_view trim_python_whitespace(std::string_view text) {
  // Ill-formed bytes are never whitespace, so this is total (render_chat rejects them anyway).
  const uint8_t* p = reinterpret_cast<const uint8_t*>(text.data());
  size_t begin = 0, end = text.size();
  while (begin < end) {
    const size_t window = end - begin < 4 ? end - begin : 4;
    if (find_invalid_utf8(p + begin, window) == 0) break;
    size_t length = 0;
    if (!is_python_space(decode_utf8(p + begin, &length))) break;
    begin += length;
  }
  while (end > begin) {
    size_t start = end - 1;  // back to the lead byte of the last character
    while (start > begin && end - start < 4 && (p[start] & 0xC0) == 0x80) --start;
    if (find_invalid_utf8(p + start, end - start) != end - start) break;
    size_t length = 0;
    if (!is_python_space(decode_utf8(p + start, &length))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

size_t chat_prompt_bytes(const ChatTemplate& chat, const ChatPrompt& prompt) {
  if (!is_known(chat.format) || (chat.format == ChatFormat::None && prompt.has_system)) return 0;
  Writer w(nullptr);
  write_chat(chat, prompt, w);
  return w.size();
}

Result<size_t> render_chat(const ChatTemplate& chat, const ChatPrompt& prompt, Span<char> out, ErrorContext* ctx) {
  if (!is_known(chat.format)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "render_chat: unknown chat format %u",
                      static_cast<unsigned>(chat.format));
  }
  if (chat.format == ChatFormat::None && prompt.has_system) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "render_chat: the program has no chat template, so a system message (%zu bytes) has no place",
                      prompt.system.size());
  }
  const auto check_utf8 = [&](std::string_view s, const char* which) -> Status {
    const size_t bad = find_invalid_utf8(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    if (bad == s.size()) return Status::ok();
    return EMBER_FAIL(ctx, Error::InvalidArgument, "render_chat: the %s message is not UTF-8 (byte %zu of %zu)", which,
                      bad, s.size());
  };
  EMBER_RETURN_IF_ERROR(check_utf8(prompt.user, "user"));
  if (prompt.has_system) EMBER_RETURN_IF_ERROR(check_utf8(prompt.system, "system"));
  const size_t needed = chat_prompt_bytes(chat, prompt);
  if (out.size() < needed) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "render_chat: the prompt needs %zu bytes, the buffer holds %zu", needed,
                      out.size());
  }
  Writer w(out.data());
  write_chat(chat, prompt, w);
  return w.size();
}

}  // namespace ember::llm
