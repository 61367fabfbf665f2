// Shared by the tokenizer tests: the checked-in tokenizers and goldens of tests/data/llm (made by
// tests/llm/make_tokenizer_golden.py), loaded through tools/common/tokenizer_json.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/llm/tokenizer.h"
#include "tools/common/tokenizer_json.h"

#ifndef EMBER_LLM_TEST_DATA
#error "EMBER_LLM_TEST_DATA (tests/data/llm) must be defined by the build"
#endif

namespace ember::llm::testing {

// $EMBER_LLM_TEST_DATA overrides the folder (make_tokenizer_golden.py --stress writes a bigger one).
inline std::string data_path(const std::string& name) {
  const char* dir = std::getenv("EMBER_LLM_TEST_DATA");
  return std::string(dir != nullptr && dir[0] != '\0' ? dir : EMBER_LLM_TEST_DATA) + "/" + name;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One JSON value per line.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// A Tokenizer with everything it borrows: TokenizerData, the added-token views and its memory.
struct LoadedTokenizer {
  tools::TokenizerData data;
  std::vector<AddedTokenDesc> added;
  std::vector<uint8_t> memory;
  std::unique_ptr<BumpAllocator> allocator;
  std::unique_ptr<Tokenizer> tokenizer;

  const Tokenizer& operator*() const { return *tokenizer; }
  const Tokenizer* operator->() const { return tokenizer.get(); }
};

// A Tokenizer of `data`. Fails the test on error.
inline std::unique_ptr<LoadedTokenizer> load_tokenizer(tools::TokenizerData data) {
  auto t = std::make_unique<LoadedTokenizer>();
  t->data = std::move(data);
  const TokenizerDesc desc = tools::make_tokenizer_desc(t->data, &t->added);
  t->memory.resize(Tokenizer::memory_bytes(desc));
  t->allocator = std::make_unique<BumpAllocator>(Span<uint8_t>(t->memory.data(), t->memory.size()));
  ErrorContext ctx;
  Result<Tokenizer> r = Tokenizer::load(desc, *t->allocator, &ctx);
  EXPECT_TRUE(r.is_ok()) << ctx.message;
  if (!r.is_ok()) return nullptr;
  t->tokenizer = std::make_unique<Tokenizer>(std::move(r).value());
  return t;
}

// Loads tests/data/llm/<kind>/tokenizer.json (+ tokenizer_config.json). Fails the test on error.
inline std::unique_ptr<LoadedTokenizer> load_tokenizer(const std::string& kind) {
  return load_tokenizer(
      tools::load_tokenizer_json(data_path(kind + "/tokenizer.json"), data_path(kind + "/tokenizer_config.json")));
}

// encode() with buffers of the documented worst-case sizes.
inline std::vector<int32_t> encode(const Tokenizer& tok, const std::string& text, bool add_special_tokens) {
  std::vector<int32_t> ids(tok.max_token_count(text.size()));
  std::vector<uint8_t> scratch(tok.encode_scratch_bytes(text.size()));
  ErrorContext ctx;
  Result<size_t> n = tok.encode(text, Span<int32_t>(ids.data(), ids.size()), Span<uint8_t>(scratch.data(), scratch.size()),
                                add_special_tokens, &ctx);
  EXPECT_TRUE(n.is_ok()) << ctx.message;
  ids.resize(n.is_ok() ? n.value() : 0);
  return ids;
}

inline std::string decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special_tokens) {
  std::string out(3 * tok.max_token_bytes() * ids.size() + 3, '\0');
  ErrorContext ctx;
  Result<size_t> n = tok.decode(Span<const int32_t>(ids.data(), ids.size()), Span<char>(out.data(), out.size()),
                                skip_special_tokens, &ctx);
  EXPECT_TRUE(n.is_ok()) << ctx.message;
  out.resize(n.is_ok() ? n.value() : 0);
  return out;
}

// decode() through a StreamDecoder, one id at a time; checks every piece is well-formed UTF-8.
inline std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special_tokens) {
  StreamDecoder stream(tok, skip_special_tokens);
  std::string out, piece(stream.max_push_bytes(), '\0');
  for (int32_t id : ids) {
    Result<size_t> n = stream.push(id, Span<char>(piece.data(), piece.size()));
    EXPECT_TRUE(n.is_ok());
    if (!n.is_ok()) return out;
    EXPECT_EQ(find_invalid_utf8(reinterpret_cast<const uint8_t*>(piece.data()), n.value()), n.value());
    out.append(piece.data(), n.value());
  }
  Result<size_t> n = stream.flush(Span<char>(piece.data(), piece.size()));
  EXPECT_TRUE(n.is_ok());
  if (n.is_ok()) out.append(piece.data(), n.value());
  EXPECT_EQ(stream.pending_bytes(), 0u);
  return out;
}

inline std::string escaped(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace ember::llm::testing
