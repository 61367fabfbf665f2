// render_chat against the text HF's apply_chat_template(messages, add_generation_prompt=True) gives.
// The expected strings were written from the templates (tests/data/llm/{qwen2,llama3}/
// tokenizer_config.json; Qwen3's released template for the ChatML case without a default system
// message) and checked by rendering those templates with jinja2 as transformers does
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks); tests/exporter/llm_info_test.cc
// compares the encoded ids with transformers' apply_chat_template(tokenize=True).
#include "runtime/llm/chat.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ember::llm {
namespace {

ChatTemplate qwen2() {
  ChatTemplate chat;
  chat.format = ChatFormat::ChatMl;
  chat.has_default_system = true;
  chat.default_system = "You are a helpful assistant.";
  return chat;
}

ChatTemplate qwen3() {
  ChatTemplate chat;
  chat.format = ChatFormat::ChatMl;
  return chat;
}

ChatTemplate llama3() {
  ChatTemplate chat;
  chat.format = ChatFormat::Llama3;
  return chat;
}

ChatPrompt user(std::string_view text) {
  ChatPrompt p;
  p.user = text;
  return p;
}

ChatPrompt with_system(std::string_view system, std::string_view text) {
  ChatPrompt p = user(text);
  p.has_system = true;
  p.system = system;
  return p;
}

std::string render(const ChatTemplate& chat, const ChatPrompt& prompt) {
  const size_t size = chat_prompt_bytes(chat, prompt);
  std::vector<char> out(size + 7, '#');
  ErrorContext ctx;
  Result<size_t> n = render_chat(chat, prompt, Span<char>(out.data(), out.size()), &ctx);
  EXPECT_TRUE(n.is_ok()) << ctx.message;
  if (!n.is_ok()) return "<error>";
  EXPECT_EQ(*n, size);
  EXPECT_EQ(out[size], '#');  // nothing past the rendered text
  return std::string(out.data(), *n);
}

TEST(ChatTest, ChatMlInsertsTheTemplatesDefaultSystemMessage) {
  EXPECT_EQ(render(qwen2(), user("Hello, world!")),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello, world!<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTest, ChatMlUsesTheGivenSystemMessageVerbatim) {
  EXPECT_EQ(render(qwen2(), with_system(" Be terse.\n", "  Two\nlines \n")),
            "<|im_start|>system\n Be terse.\n<|im_end|>\n"
            "<|im_start|>user\n  Two\nlines \n<|im_end|>\n"
            "<|im_start|>assistant\n");
  // An empty system message is still a system message.
  EXPECT_EQ(render(qwen2(), with_system("", "hi")),
            "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTest, ChatMlWithoutDefaultSystemMessage) {
  EXPECT_EQ(render(qwen3(), user("Hi")), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(qwen3(), with_system("S", "")),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
  // Special-token text inside a message is copied as it is (the tokenizer splits it out, as HF's does).
  EXPECT_EQ(render(qwen3(), user("a<|im_end|>b")),
            "<|im_start|>user\na<|im_end|>b<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTest, Llama3TrimsMessagesAndStartsWithBos) {
  EXPECT_EQ(render(llama3(), user("  Hello, world!\n")),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello, world!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(llama3(), with_system("\tYou are a pirate. ", "Where is the treasure?\r\n")),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pirate.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhere is the treasure?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(llama3(), with_system("", " ")),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTest, TrimFollowsPythonStrStrip) {
  // str.isspace(): U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
  // U+205F, U+3000 and ASCII \t\n\v\f\r and space; not U+200B (zero width space) or U+FEFF.
  EXPECT_EQ(trim_python_whitespace("\x1c\x1f \xc2\x85\xc2\xa0x y\xe3\x80\x80\xe2\x80\xaf\xe2\x80\x8a"), "x y");
  EXPECT_EQ(trim_python_whitespace("\xe2\x80\x8bx\xef\xbb\xbf"), "\xe2\x80\x8bx\xef\xbb\xbf");
  EXPECT_EQ(trim_python_whitespace("\v\f\r\n\t"), "");
  EXPECT_EQ(trim_python_whitespace(""), "");
  EXPECT_EQ(trim_python_whitespace("\xe1\x9a\x80\xe2\x80\xa8\xe2\x80\xa9\xe2\x81\x9f" "a"), "a");
  // Ill-formed bytes are not whitespace (and are kept).
  EXPECT_EQ(trim_python_whitespace(" \x80 a \xe3\x80"), "\x80 a \xe3\x80");
}

TEST(ChatTest, NoneFormatPassesTheUserTextThrough) {
  EXPECT_EQ(render(ChatTemplate(), user("  raw prompt ")), "  raw prompt ");
  std::vector<char> out(64);
  ErrorContext ctx;
  Result<size_t> r = render_chat(ChatTemplate(), with_system("sys", "hi"), Span<char>(out.data(), out.size()), &ctx);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::InvalidArgument);
  EXPECT_NE(std::string(ctx.message).find("system message"), std::string::npos) << ctx.message;
  EXPECT_EQ(chat_prompt_bytes(ChatTemplate(), with_system("sys", "hi")), 0u);
}

TEST(ChatTest, BufferTooSmallIsOutOfMemoryAndWritesNothing) {
  const ChatPrompt prompt = user("Hello");
  const size_t size = chat_prompt_bytes(qwen2(), prompt);
  std::vector<char> out(size - 1, '#');
  ErrorContext ctx;
  Result<size_t> r = render_chat(qwen2(), prompt, Span<char>(out.data(), out.size()), &ctx);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::OutOfMemory);
  EXPECT_NE(std::string(ctx.message).find(std::to_string(size) + " bytes"), std::string::npos) << ctx.message;
  for (char c : out) ASSERT_EQ(c, '#');
}

TEST(ChatTest, IllFormedUtf8IsInvalidArgument) {
  std::vector<char> out(256);
  for (const ChatTemplate& chat : {qwen2(), llama3()}) {
    ErrorContext ctx;
    Result<size_t> r = render_chat(chat, user("ok \xff"), Span<char>(out.data(), out.size()), &ctx);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.error(), Error::InvalidArgument);
    EXPECT_NE(std::string(ctx.message).find("user message is not UTF-8 (byte 3"), std::string::npos) << ctx.message;
    ctx.clear();
    Result<size_t> r2 = render_chat(chat, with_system("\xc3", "ok"), Span<char>(out.data(), out.size()), &ctx);
    ASSERT_FALSE(r2.is_ok());
    EXPECT_NE(std::string(ctx.message).find("system message"), std::string::npos) << ctx.message;
  }
}

}  // namespace
}  // namespace ember::llm
