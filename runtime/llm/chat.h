// Chat prompts: the text Hugging Face's apply_chat_template(messages, add_generation_prompt=True)
// renders for one user message, optionally after a system message, for the two template families
// the exporter recognizes (ChatFormat below). The runtime never runs Jinja: the exporter detects the
// family from the template text and stores it in the program (runtime/llm/program_info.h).
//
//   ChatPrompt prompt;
//   prompt.user = user_text;
//   EMBER_ASSIGN_OR_RETURN(size_t n, render_chat(view.chat, prompt, text, &ctx));
//   EMBER_ASSIGN_OR_RETURN(size_t ids, tokenizer.encode({text.data(), n}, out_ids, scratch,
//                                                       /*add_special_tokens=*/false, &ctx));
//
// Encode the result with add_special_tokens = false, as apply_chat_template(tokenize=True) does: the
// Llama-3 text already starts with "<|begin_of_text|>" (the template emits bos_token itself), and
// encoding it with the BOS post-processor as well would give two BOS ids.
//
// No heap; thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/core/span.h"
#include "runtime/core/status.h"

namespace ember::llm {

enum class ChatFormat : uint8_t {
  // No chat template (a base model), or one the exporter does not recognize: the prompt is the
  // user's text as it is.
  None = 0,
  // ChatML (Qwen2, Qwen2.5, Qwen3):
  //   [<|im_start|>system\n{system}<|im_end|>\n]<|im_start|>user\n{user}<|im_end|>\n{generation prompt}
  // where the generation prompt is "<|im_start|>assistant\n" unless the template says otherwise.
  // The system block is there when the prompt has a system message, or else when the template
  // inserts a default one (ChatTemplate::default_system: Qwen2 "You are a helpful assistant.";
  // Qwen3 inserts none). Messages are copied verbatim.
  ChatMl = 1,
  // Llama-3 (Meta-Llama-3-*-Instruct):
  //   <|begin_of_text|>[<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>]
  //   <|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
  // Each message is stripped of leading and trailing whitespace (Jinja's `trim`, i.e. Python's
  // str.strip(): the code points for which str.isspace() is true).
  Llama3 = 2,
};

// What a program says about its chat template.
struct ChatTemplate {
  ChatFormat format = ChatFormat::None;
  // ChatML: the system message the template inserts when the prompt has none.
  bool has_default_system = false;
  std::string_view default_system;
  // ChatML: what the template appends for add_generation_prompt; empty = "<|im_start|>assistant\n"
  // (Qwen2, Qwen2.5, Qwen3; Qwen3 "Thinking-2507" templates append "<|im_start|>assistant\n<think>\n").
  std::string_view generation_prompt;
};

// One user message, optionally preceded by a system message (HF renders an empty system message,
// so "none" and "empty" differ).
struct ChatPrompt {
  std::string_view user;
  bool has_system = false;
  std::string_view system;
};

// Bytes render_chat() writes for this prompt (0 when it would fail: ChatFormat::None with a system
// message).
size_t chat_prompt_bytes(const ChatTemplate& chat, const ChatPrompt& prompt);

// Writes the rendered prompt to `out` and returns its byte count. Errors: InvalidArgument (the
// messages are not well-formed UTF-8, ctx naming which and the byte offset; or a system message
// with ChatFormat::None, which has nowhere to put it), OutOfMemory (`out` is smaller than
// chat_prompt_bytes(); ctx names both sizes, nothing is written).
Result<size_t> render_chat(const ChatTemplate& chat, const ChatPrompt& prompt, Span<char> out,
                           ErrorContext* ctx = nullptr);

// `text` without the leading and trailing code points that Python's str.isspace() accepts (what
// Jinja's `trim` filter removes). Ill-formed UTF-8 bytes count as non-whitespace.
std::string_view trim_python_whitespace(std::string_view text);

}  // namespace ember::llm
