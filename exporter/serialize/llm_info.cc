#include "exporter/serialize/llm_info.h"

#include <cmath>

#include "exporter/ir/graph.h"

namespace ember::exporter {
namespace {

// The Jinja string literal that contains t[at] (its quote is the character before `at`), from `at` to
// its closing quote, with the escapes a chat template uses (\n, \t, \r, \\, \', \") resolved;
// nullopt when t[at - 1] is not a quote or the literal does not end.
std::optional<std::string> literal_from(const std::string& t, size_t at) {
  if (at == 0 || (t[at - 1] != '\'' && t[at - 1] != '"')) return std::nullopt;
  const char quote = t[at - 1];
  std::string out;
  for (size_t i = at; i < t.size(); ++i) {
    if (t[i] == quote) return out;
    if (t[i] == '\\' && i + 1 < t.size()) {
      const char c = t[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    } else {
      out += t[i];
    }
  }
  return std::nullopt;
}

// The system message a ChatML template inserts when the conversation has none: a literal
// "<|im_start|>system\n...<|im_end|>" (Qwen2, Qwen2.5). A system block built from an expression
// (`'<|im_start|>system\n' + messages[0]['content'] + ...`, Qwen3) is not one.
std::optional<std::string> chatml_default_system(const std::string& t) {
  const std::string head = "<|im_start|>system\n", end = "<|im_end|>";
  for (size_t pos = t.find("<|im_start|>system"); pos != std::string::npos;
       pos = t.find("<|im_start|>system", pos + 1)) {
    const std::optional<std::string> literal = literal_from(t, pos);
    if (!literal || literal->compare(0, head.size(), head) != 0) continue;
    const size_t stop = literal->find(end, head.size());
    if (stop != std::string::npos) return literal->substr(head.size(), stop - head.size());
  }
  return std::nullopt;
}

// What add_generation_prompt appends: the first literal starting "<|im_start|>assistant" after it.
std::optional<std::string> chatml_generation_prompt(const std::string& t) {
  const size_t condition = t.find("add_generation_prompt");
  if (condition == std::string::npos) return std::nullopt;
  const size_t begin = t.find("<|im_start|>assistant", condition);
  return begin == std::string::npos ? std::nullopt : literal_from(t, begin);
}

void check(bool ok, const std::string& what) {
  if (!ok) throw ExportError("LLM info: " + what);
}

fb::PreTokenizerKind to_fb(llm::PreTokenizerKind kind) {
  switch (kind) {
    case llm::PreTokenizerKind::Llama3: return fb::PreTokenizerKind::Llama3;
    case llm::PreTokenizerKind::Qwen2: return fb::PreTokenizerKind::Qwen2;
    case llm::PreTokenizerKind::Gpt2: return fb::PreTokenizerKind::Gpt2;
    case llm::PreTokenizerKind::Gpt2Digits: return fb::PreTokenizerKind::Gpt2Digits;
    case llm::PreTokenizerKind::Whole: return fb::PreTokenizerKind::Whole;
    case llm::PreTokenizerKind::Metaspace: return fb::PreTokenizerKind::Metaspace;
    case llm::PreTokenizerKind::MetaspaceSplit: return fb::PreTokenizerKind::MetaspaceSplit;
    default: break;
  }
  throw ExportError("LLM info: tokenizer pre_tokenizer " + std::to_string(static_cast<int>(kind)) + " is unknown");
}

fb::NormalizerKind to_fb(llm::NormalizerKind kind) {
  switch (kind) {
    case llm::NormalizerKind::None: return fb::NormalizerKind::None;
    case llm::NormalizerKind::Nfc: return fb::NormalizerKind::Nfc;
    case llm::NormalizerKind::Replace: return fb::NormalizerKind::Replace;
    case llm::NormalizerKind::PrependReplace: return fb::NormalizerKind::PrependReplace;
  }
  throw ExportError("LLM info: tokenizer normalizer " + std::to_string(static_cast<int>(kind)) + " is unknown");
}

fb::MetaspacePrepend to_fb(llm::MetaspacePrepend scheme) {
  switch (scheme) {
    case llm::MetaspacePrepend::Always: return fb::MetaspacePrepend::Always;
    case llm::MetaspacePrepend::First: return fb::MetaspacePrepend::First;
    case llm::MetaspacePrepend::Never: return fb::MetaspacePrepend::Never;
  }
  throw ExportError("LLM info: tokenizer metaspace_prepend " + std::to_string(static_cast<int>(scheme)) + " is unknown");
}

fb::DecoderKind to_fb(llm::DecoderKind kind) {
  switch (kind) {
    case llm::DecoderKind::ByteLevel: return fb::DecoderKind::ByteLevel;
    case llm::DecoderKind::ReplaceByteFallback: return fb::DecoderKind::ReplaceByteFallback;
    case llm::DecoderKind::Metaspace: return fb::DecoderKind::Metaspace;
    case llm::DecoderKind::MetaspaceNever: return fb::DecoderKind::MetaspaceNever;
  }
  throw ExportError("LLM info: tokenizer decoder " + std::to_string(static_cast<int>(kind)) + " is unknown");
}

fb::ChatFormat to_fb(ChatFormat format) {
  switch (format) {
    case ChatFormat::None: return fb::ChatFormat::None;
    case ChatFormat::ChatMl: return fb::ChatFormat::ChatMl;
    case ChatFormat::Llama3: return fb::ChatFormat::Llama3;
  }
  return fb::ChatFormat::Invalid;
}

// Written through the builder, not the object API: that one drops an empty string, and an empty
// default system message must stay present (it renders as an empty system block).
flatbuffers::Offset<fb::TokenizerTable> write_tokenizer(flatbuffers::FlatBufferBuilder& fbb,
                                                        const tools::TokenizerData& t, int32_t vocab_size) {
  check(t.token_offsets.size() >= 2 && t.token_offsets.front() == 0 && t.token_offsets.back() == t.token_bytes.size(),
        "tokenizer offsets do not cover token_bytes (" + std::to_string(t.token_offsets.size()) + " offsets, " +
            std::to_string(t.token_bytes.size()) + " bytes)");
  const size_t count = t.token_offsets.size() - 1;
  check(count <= static_cast<size_t>(vocab_size), "the tokenizer has " + std::to_string(count) +
                                                      " tokens, more than vocab_size " + std::to_string(vocab_size));
  std::vector<uint32_t> merges;
  merges.reserve(2 * t.merges.size());
  for (const llm::MergeRule& m : t.merges) {
    merges.push_back(m.left);
    merges.push_back(m.right);
  }
  std::vector<flatbuffers::Offset<fb::TokenizerAddedToken>> added;
  for (const tools::TokenizerData::AddedToken& a : t.added_tokens) {
    added.push_back(fb::CreateTokenizerAddedToken(fbb, a.id, fbb.CreateString(a.content), a.special));
  }
  const ChatInfo chat = detect_chat(t.chat_template, t.bos_token);
  const auto bytes_vec = fbb.CreateVector(t.token_bytes);
  const auto offsets_vec = fbb.CreateVector(t.token_offsets);
  const auto merges_vec = fbb.CreateVector(merges);
  const auto added_vec = fbb.CreateVector(added);
  const flatbuffers::Offset<flatbuffers::String> none;
  const auto template_str = t.chat_template.empty() ? none : fbb.CreateString(t.chat_template);
  const auto system_str = chat.default_system ? fbb.CreateString(*chat.default_system) : none;
  const auto generation_str = chat.generation_prompt ? fbb.CreateString(*chat.generation_prompt) : none;
  fb::TokenizerTableBuilder b(fbb);
  b.add_token_count(static_cast<uint32_t>(count));
  b.add_token_bytes(bytes_vec);
  b.add_token_offsets(offsets_vec);
  b.add_model_token_count(t.model_token_count);
  b.add_merges(merges_vec);
  b.add_added_tokens(added_vec);
  b.add_pre_tokenizer(to_fb(t.pre_tokenizer));
  b.add_normalizer(to_fb(t.normalizer));
  b.add_ignore_merges(t.ignore_merges);
  b.add_add_bos(t.add_bos);
  b.add_bos_id(t.bos_id);
  if (!template_str.IsNull()) b.add_chat_template(template_str);
  b.add_chat_format(to_fb(chat.format));
  if (!system_str.IsNull()) b.add_chat_default_system(system_str);
  if (!generation_str.IsNull()) b.add_chat_generation_prompt(generation_str);
  b.add_unk_id(t.unk_id);
  b.add_fuse_unk(t.fuse_unk);
  b.add_byte_fallback(t.byte_fallback);
  b.add_metaspace_prepend(to_fb(t.metaspace_prepend));
  b.add_decoder(to_fb(t.decoder));
  b.add_decoder_strip_spaces(t.decoder_strip_spaces);
  return b.Finish();
}

}  // namespace

ChatInfo detect_chat(const std::string& chat_template, const std::string& bos_token) {
  ChatInfo info;
  if (chat_template.find("<|im_start|>") != std::string::npos) {
    info.format = ChatFormat::ChatMl;
    info.default_system = chatml_default_system(chat_template);
    info.generation_prompt = chatml_generation_prompt(chat_template);
  } else if (chat_template.find("<|start_header_id|>") != std::string::npos &&
             chat_template.find("Cutting Knowledge Date") == std::string::npos && bos_token == "<|begin_of_text|>") {
    info.format = ChatFormat::Llama3;
  }
  return info;
}

flatbuffers::Offset<fb::LlmInfo> write_llm_info(flatbuffers::FlatBufferBuilder& fbb, const LlmProgramInfo& info) {
  const std::pair<const char*, int32_t> sizes[] = {
      {"vocab_size", info.vocab_size},   {"block_size", info.block_size},
      {"max_seqs", info.max_seqs},       {"max_tokens", info.max_tokens},
      {"max_context", info.max_context}, {"max_blocks_per_seq", info.max_blocks_per_seq},
      {"num_layers", info.num_layers},   {"kv_heads", info.kv_heads},
      {"head_dim", info.head_dim}};
  for (const auto& [name, value] : sizes) check(value > 0, std::string(name) + " is " + std::to_string(value));
  check(info.max_tokens >= info.max_seqs, "max_tokens " + std::to_string(info.max_tokens) + " is below max_seqs " +
                                              std::to_string(info.max_seqs));
  check(info.max_context % info.block_size == 0 &&
            int64_t{info.max_blocks_per_seq} * info.block_size >= info.max_context,
        "max_context " + std::to_string(info.max_context) + " is not a multiple of block_size " +
            std::to_string(info.block_size) + " or exceeds max_blocks_per_seq " +
            std::to_string(info.max_blocks_per_seq) + " blocks");
  check(info.kv_dtype == ScalarType::F32 || info.kv_dtype == ScalarType::F16 || info.kv_dtype == ScalarType::BF16 ||
            info.kv_dtype == ScalarType::F8E4M3FN,
        "kv_dtype " + std::to_string(static_cast<int>(info.kv_dtype)) + " is not f32, f16, bf16 or f8e4m3fn");
  for (int32_t id : info.eos_ids) {
    check(id >= 0 && id < info.vocab_size, "eos id " + std::to_string(id) + " is outside the vocabulary (" +
                                               std::to_string(info.vocab_size) + ")");
  }
  check(info.bos_id >= -1 && info.bos_id < info.vocab_size, "bos_id " + std::to_string(info.bos_id) + " is invalid");
  check(!info.temperature || (std::isfinite(*info.temperature) && *info.temperature >= 0),
        "temperature " + std::to_string(info.temperature.value_or(0)) + " is not >= 0");
  check(!info.top_k || *info.top_k >= 0, "top_k " + std::to_string(info.top_k.value_or(0)) + " is negative");
  check(!info.top_p || (*info.top_p > 0 && *info.top_p <= 1),
        "top_p " + std::to_string(info.top_p.value_or(0)) + " is not in (0, 1]");
  check(!info.repetition_penalty || (std::isfinite(*info.repetition_penalty) && *info.repetition_penalty > 0),
        "repetition_penalty " + std::to_string(info.repetition_penalty.value_or(0)) + " is not > 0");

  const auto tokenizer = info.tokenizer ? write_tokenizer(fbb, *info.tokenizer, info.vocab_size)
                                        : flatbuffers::Offset<fb::TokenizerTable>();
  const auto eos_vec = fbb.CreateVector(info.eos_ids);
  fb::LlmInfoBuilder b(fbb);
  b.add_vocab_size(info.vocab_size);
  b.add_block_size(info.block_size);
  b.add_max_seqs(info.max_seqs);
  b.add_max_tokens(info.max_tokens);
  b.add_max_context(info.max_context);
  b.add_max_blocks_per_seq(info.max_blocks_per_seq);
  b.add_num_layers(info.num_layers);
  b.add_kv_heads(info.kv_heads);
  b.add_head_dim(info.head_dim);
  b.add_kv_dtype(static_cast<fb::ScalarType>(info.kv_dtype));
  b.add_eos_ids(eos_vec);
  b.add_bos_id(info.bos_id);
  if (info.temperature) b.add_temperature(*info.temperature);
  if (info.top_k) b.add_top_k(*info.top_k);
  if (info.top_p) b.add_top_p(*info.top_p);
  if (info.repetition_penalty) b.add_repetition_penalty(*info.repetition_penalty);
  if (info.do_sample) b.add_do_sample(*info.do_sample);
  if (info.tokenizer) b.add_tokenizer(tokenizer);
  return b.Finish();
}

}  // namespace ember::exporter
