// Reads a Hugging Face `tokenizer.json` (+ optional `tokenizer_config.json`) into TokenizerData: an
// owning, plain copy of what runtime/llm's Tokenizer needs (BPE in the byte-level layouts of
// Llama-3, Qwen2, GPT-2 and SmolLM, and the SentencePiece layouts of Llama-2, Mistral and Gemma;
// runtime/llm/README.md lists the accepted shapes), which the exporter serializes into the program
// and the runner can load instead.
//
// Host code: throws TokenizerJsonError, whose message names the file, the field and the value, for
// malformed JSON and for every tokenizer.json feature the runtime does not implement (another model
// type, dropout, byte_fallback with a byte-level pre-tokenizer, an unknown pre-tokenizer or pattern,
// normalizers other than NFC and the SentencePiece space rewrites, added-token flags lstrip / rstrip
// / single_word, post-processors other than "<bos> $A", decoders other than ByteLevel, Metaspace and
// the SentencePiece Replace / ByteFallback / Fuse / Strip sequence, truncation or padding): refusing
// is better than tokenizing wrongly.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/llm/tokenizer.h"

namespace ember::tools {

class TokenizerJsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TokenizerData {
  struct AddedToken {
    uint32_t id = 0;
    std::string content;  // matched verbatim in the input
    bool special = false;
  };
  // Token t decodes to token_bytes[token_offsets[t], token_offsets[t + 1]) (llm::TokenizerDesc).
  std::vector<uint8_t> token_bytes;
  std::vector<uint32_t> token_offsets;
  uint32_t model_token_count = 0;          // ids below are model.vocab, the rest added tokens
  // Token strings: byte-level layouts hold the bytes the characters stand for, the others the
  // string (llm::TokenizerDesc::token_bytes).
  std::vector<llm::MergeRule> merges;      // rank order
  std::vector<AddedToken> added_tokens;    // in tokenizer.json order
  llm::PreTokenizerKind pre_tokenizer = llm::PreTokenizerKind::Invalid;
  llm::NormalizerKind normalizer = llm::NormalizerKind::None;
  bool ignore_merges = false;
  bool add_bos = false;                    // from the post-processor
  uint32_t bos_id = 0;
  int32_t unk_id = -1;                     // model.unk_token's id (-1: none)
  bool fuse_unk = false;
  bool byte_fallback = false;
  llm::MetaspacePrepend metaspace_prepend = llm::MetaspacePrepend::Always;  // Metaspace pre-tokenizers
  llm::DecoderKind decoder = llm::DecoderKind::ByteLevel;
  uint8_t decoder_strip_spaces = 0;
  // From tokenizer_config.json (empty / -1 when absent).
  std::string chat_template;
  std::string bos_token;
  std::string eos_token;
  int32_t bos_token_id = -1;               // bos_token / eos_token resolved to ids
  int32_t eos_token_id = -1;
};

// Parses the text of a tokenizer.json and, when config_json is not empty, of its
// tokenizer_config.json. `name` prefixes error messages (a path, typically). JSON above 128 MiB or
// nested deeper than 512 levels is refused before parsing (tools/common/host_io.h). The fuzzers'
// entry point.
TokenizerData parse_tokenizer_json(const std::string& tokenizer_json, const std::string& config_json = "",
                                   const std::string& name = "tokenizer.json");
// Reads the files (regular files only, at most 128 MiB; a FIFO is refused without blocking);
// config_path may be empty. Throws TokenizerJsonError also when a file cannot be read.
TokenizerData load_tokenizer_json(const std::string& tokenizer_path, const std::string& config_path = "");

// Views of `data` for Tokenizer::load. `added_views` receives the added-token views the desc points
// to; `data` and `added_views` must outlive the desc and the Tokenizer.
llm::TokenizerDesc make_tokenizer_desc(const TokenizerData& data, std::vector<llm::AddedTokenDesc>* added_views);

// HF's ByteLevel alphabet (GPT-2 bytes_to_unicode): the code point that stands for byte b.
uint32_t byte_level_char(uint8_t b);

}  // namespace ember::tools
