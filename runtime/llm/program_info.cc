#include "runtime/llm/program_info.h"

namespace ember::llm {
namespace {

// The tables' [uint] / [int] vectors are viewed in place: FlatBuffers stores them little-endian,
// 4-aligned (the verifier checks the length word's alignment and the elements follow it).
static_assert(FLATBUFFERS_LITTLEENDIAN, "views FlatBuffers vectors in place: little-endian hosts only");
static_assert(sizeof(MergeRule) == 2 * sizeof(uint32_t) && alignof(MergeRule) == alignof(uint32_t),
              "MergeRule must be a (left, right) pair of uint32");

template <typename T>
Span<const T> view(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? Span<const T>() : Span<const T>(v->data(), v->size());
}

std::string_view view(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : std::string_view(s->c_str(), s->size());
}

template <typename T>
void set_optional(const flatbuffers::Optional<T>& value, bool* has, T* out) {
  *has = value.has_value();
  if (value.has_value()) *out = *value;
}

}  // namespace

bool has_llm_info(const fb::Program& program) { return program.llm() != nullptr; }

size_t llm_added_token_count(const fb::Program& program) {
  const fb::LlmInfo* llm = program.llm();
  if (llm == nullptr || llm->tokenizer() == nullptr || llm->tokenizer()->added_tokens() == nullptr) return 0;
  return llm->tokenizer()->added_tokens()->size();
}

Result<LlmProgramView> read_llm_info(const fb::Program& program, Span<AddedTokenDesc> added_storage,
                                     ErrorContext* ctx) {
  const fb::LlmInfo* llm = program.llm();
  if (llm == nullptr) return EMBER_FAIL(ctx, Error::NotFound, "the program has no LlmInfo table (not an LLM program)");
  LlmProgramView v;
  v.vocab_size = llm->vocab_size();
  v.block_size = llm->block_size();
  v.max_seqs = llm->max_seqs();
  v.max_tokens = llm->max_tokens();
  v.max_context = llm->max_context();
  v.max_blocks_per_seq = llm->max_blocks_per_seq();
  v.num_layers = llm->num_layers();
  v.kv_heads = llm->kv_heads();
  v.head_dim = llm->head_dim();
  v.kv_dtype = static_cast<ScalarType>(llm->kv_dtype());  // numbers equal (scalar_type.h)
  v.eos_ids = view(llm->eos_ids());
  v.bos_id = llm->bos_id();
  GenerationDefaults& g = v.generation;
  set_optional(llm->temperature(), &g.has_temperature, &g.temperature);
  set_optional(llm->top_k(), &g.has_top_k, &g.top_k);
  set_optional(llm->top_p(), &g.has_top_p, &g.top_p);
  set_optional(llm->repetition_penalty(), &g.has_repetition_penalty, &g.repetition_penalty);
  set_optional(llm->do_sample(), &g.has_do_sample, &g.do_sample);

  const fb::TokenizerTable* t = llm->tokenizer();
  if (t == nullptr) return v;
  v.has_tokenizer = true;
  TokenizerDesc& d = v.tokenizer;
  d.token_bytes = view(t->token_bytes());
  d.token_offsets = view(t->token_offsets());
  d.model_token_count = t->model_token_count();
  const Span<const uint32_t> merges = view(t->merges());
  d.merges = Span<const MergeRule>(reinterpret_cast<const MergeRule*>(merges.data()), merges.size() / 2);
  switch (t->pre_tokenizer()) {
    case fb::PreTokenizerKind::Llama3: d.pre_tokenizer = PreTokenizerKind::Llama3; break;
    case fb::PreTokenizerKind::Qwen2: d.pre_tokenizer = PreTokenizerKind::Qwen2; break;
    case fb::PreTokenizerKind::Gpt2: d.pre_tokenizer = PreTokenizerKind::Gpt2; break;
    case fb::PreTokenizerKind::Gpt2Digits: d.pre_tokenizer = PreTokenizerKind::Gpt2Digits; break;
    case fb::PreTokenizerKind::Whole: d.pre_tokenizer = PreTokenizerKind::Whole; break;
    case fb::PreTokenizerKind::Metaspace: d.pre_tokenizer = PreTokenizerKind::Metaspace; break;
    case fb::PreTokenizerKind::MetaspaceSplit: d.pre_tokenizer = PreTokenizerKind::MetaspaceSplit; break;
    default:
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.pre_tokenizer %u is unknown",
                        static_cast<unsigned>(t->pre_tokenizer()));
  }
  switch (t->normalizer()) {
    case fb::NormalizerKind::None: d.normalizer = NormalizerKind::None; break;
    case fb::NormalizerKind::Nfc: d.normalizer = NormalizerKind::Nfc; break;
    case fb::NormalizerKind::Replace: d.normalizer = NormalizerKind::Replace; break;
    case fb::NormalizerKind::PrependReplace: d.normalizer = NormalizerKind::PrependReplace; break;
    default:
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.normalizer %u is unknown",
                        static_cast<unsigned>(t->normalizer()));
  }
  switch (t->metaspace_prepend()) {
    case fb::MetaspacePrepend::Always: d.metaspace_prepend = MetaspacePrepend::Always; break;
    case fb::MetaspacePrepend::First: d.metaspace_prepend = MetaspacePrepend::First; break;
    case fb::MetaspacePrepend::Never: d.metaspace_prepend = MetaspacePrepend::Never; break;
    default:
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.metaspace_prepend %u is unknown",
                        static_cast<unsigned>(t->metaspace_prepend()));
  }
  switch (t->decoder()) {
    case fb::DecoderKind::ByteLevel: d.decoder = DecoderKind::ByteLevel; break;
    case fb::DecoderKind::ReplaceByteFallback: d.decoder = DecoderKind::ReplaceByteFallback; break;
    case fb::DecoderKind::Metaspace: d.decoder = DecoderKind::Metaspace; break;
    case fb::DecoderKind::MetaspaceNever: d.decoder = DecoderKind::MetaspaceNever; break;
    default:
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.decoder %u is unknown",
                        static_cast<unsigned>(t->decoder()));
  }
  d.unk_id = t->unk_id();
  d.fuse_unk = t->fuse_unk();
  d.byte_fallback = t->byte_fallback();
  d.decoder_strip_spaces = t->decoder_strip_spaces();
  switch (t->chat_format()) {
    case fb::ChatFormat::None: v.chat.format = ChatFormat::None; break;
    case fb::ChatFormat::ChatMl: v.chat.format = ChatFormat::ChatMl; break;
    case fb::ChatFormat::Llama3: v.chat.format = ChatFormat::Llama3; break;
    default:
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.chat_format %u is unknown",
                        static_cast<unsigned>(t->chat_format()));
  }
  v.chat.has_default_system = t->chat_default_system() != nullptr;
  v.chat.default_system = view(t->chat_default_system());
  v.chat.generation_prompt = view(t->chat_generation_prompt());
  v.chat_template = view(t->chat_template());
  d.ignore_merges = t->ignore_merges();
  d.add_bos = t->add_bos();
  d.bos_id = t->bos_id();

  const size_t added_count = llm_added_token_count(program);
  if (added_storage.size() < added_count) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "read_llm_info: %zu added tokens, storage for %zu", added_count,
                      added_storage.size());
  }
  for (size_t i = 0; i < added_count; ++i) {
    const fb::TokenizerAddedToken* a = t->added_tokens()->Get(static_cast<uint32_t>(i));
    AddedTokenDesc& out = added_storage[i];
    out.id = a->id();
    out.content = a->content()->c_str();
    out.content_size = a->content()->size();
    out.special = a->special();
  }
  d.added_tokens = Span<const AddedTokenDesc>(added_storage.data(), added_count);
  return v;
}

}  // namespace ember::llm
