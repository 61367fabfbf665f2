// LlmInfo end to end (docs/DESIGN.md §6): TokenizerData -> exporter pipeline (a trivial graph) -> .pte ->
// Program::load (validator) -> read_llm_info -> Tokenizer::load, compared with the tokenizer read
// straight from tokenizer.json; chat prompts compared with transformers' apply_chat_template ids;
// hostile LlmInfo tables, each rejected at load with InvalidProgram naming the field; the exporter's
// chat template detection.
#include "exporter/serialize/llm_info.h"

#include <gtest/gtest.h>

#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "exporter/importers/builder/graph_builder.h"
#include "exporter/pipeline.h"
#include "runtime/llm/chat.h"
#include "runtime/llm/program_info.h"
#include "runtime/llm/tokenizer.h"
#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"
#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::exporter {
namespace {

namespace lt = ::ember::llm::testing;
namespace pt = ::ember::testing;

tools::TokenizerData load_data(const std::string& family) {
  return tools::load_tokenizer_json(lt::data_path(family + "/tokenizer.json"),
                                    lt::data_path(family + "/tokenizer_config.json"));
}

// The facts of a small step method; Qwen-style padding of the vocabulary past the tokenizer's ids.
LlmProgramInfo make_info(const std::string& family) {
  LlmProgramInfo info;
  info.tokenizer = load_data(family);
  const int32_t token_count = static_cast<int32_t>(info.tokenizer->token_offsets.size() - 1);
  info.vocab_size = family == "qwen2" ? token_count + 23 : token_count;
  info.block_size = 16;
  info.max_seqs = 4;
  info.max_tokens = 64;
  info.max_context = 256;
  info.max_blocks_per_seq = 16;
  info.num_layers = 2;
  info.kv_heads = 2;
  info.head_dim = 32;
  info.kv_dtype = ScalarType::BF16;
  info.eos_ids = {info.tokenizer->eos_token_id, token_count - 1};
  info.bos_id = info.tokenizer->bos_token_id;
  info.temperature = 0.7f;
  info.top_k = 20;
  info.top_p = 0.8f;
  info.do_sample = true;  // repetition_penalty left out: absent in the file
  return info;
}

Graph trivial_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {1, 4});
  b.output("y", b.relu(x));
  return b.build();
}

std::vector<uint8_t> export_with(const LlmProgramInfo* info) {
  ExportOptions options;
  options.llm = info;
  return export_graph(trivial_graph(), options).program.bytes;
}

// A program loaded by the runtime, its LlmInfo view and the tokenizer loaded from it.
struct ProgramLlm {
  pt::Runtime runtime;
  std::unique_ptr<pt::LoadedProgram> program;
  std::vector<llm::AddedTokenDesc> added;
  llm::LlmProgramView view;
  std::vector<uint8_t> memory;
  std::unique_ptr<BumpAllocator> allocator;
  std::unique_ptr<llm::Tokenizer> tokenizer;
};

std::unique_ptr<ProgramLlm> load_program_llm(const std::vector<uint8_t>& file) {
  auto p = std::make_unique<ProgramLlm>();
  p->program = std::make_unique<pt::LoadedProgram>(file, p->runtime.context);
  EXPECT_TRUE(p->program->ok()) << p->program->ctx().message;
  if (!p->program->ok()) return nullptr;
  const fb::Program& fbp = p->program->program().flatbuffer();
  p->added.resize(llm::llm_added_token_count(fbp));
  ErrorContext ctx;
  Result<llm::LlmProgramView> view =
      llm::read_llm_info(fbp, Span<llm::AddedTokenDesc>(p->added.data(), p->added.size()), &ctx);
  EXPECT_TRUE(view.is_ok()) << ctx.message;
  if (!view.is_ok()) return nullptr;
  p->view = *view;
  if (!p->view.has_tokenizer) return p;
  p->memory.resize(llm::Tokenizer::memory_bytes(p->view.tokenizer));
  p->allocator = std::make_unique<BumpAllocator>(Span<uint8_t>(p->memory.data(), p->memory.size()));
  Result<llm::Tokenizer> tok = llm::Tokenizer::load(p->view.tokenizer, *p->allocator, &ctx);
  EXPECT_TRUE(tok.is_ok()) << ctx.message;
  if (!tok.is_ok()) return nullptr;
  p->tokenizer = std::make_unique<llm::Tokenizer>(std::move(tok).value());
  return p;
}

class LlmInfoRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(LlmInfoRoundTrip, FactsSurviveExportAndLoad) {
  const LlmProgramInfo info = make_info(GetParam());
  const std::unique_ptr<ProgramLlm> p = load_program_llm(export_with(&info));
  ASSERT_NE(p, nullptr);
  const llm::LlmProgramView& v = p->view;
  EXPECT_EQ(v.vocab_size, info.vocab_size);
  EXPECT_EQ(v.block_size, 16);
  EXPECT_EQ(v.max_seqs, 4);
  EXPECT_EQ(v.max_tokens, 64);
  EXPECT_EQ(v.max_context, 256);
  EXPECT_EQ(v.max_blocks_per_seq, 16);
  EXPECT_EQ(v.num_layers, 2);
  EXPECT_EQ(v.kv_heads, 2);
  EXPECT_EQ(v.head_dim, 32);
  EXPECT_EQ(v.kv_dtype, ScalarType::BF16);
  EXPECT_EQ(std::vector<int32_t>(v.eos_ids.begin(), v.eos_ids.end()), info.eos_ids);
  EXPECT_EQ(v.bos_id, info.bos_id);
  EXPECT_TRUE(v.generation.has_temperature);
  EXPECT_FLOAT_EQ(v.generation.temperature, 0.7f);
  EXPECT_TRUE(v.generation.has_top_k);
  EXPECT_EQ(v.generation.top_k, 20);
  EXPECT_TRUE(v.generation.has_top_p);
  EXPECT_FLOAT_EQ(v.generation.top_p, 0.8f);
  EXPECT_FALSE(v.generation.has_repetition_penalty);
  EXPECT_TRUE(v.generation.has_do_sample);
  EXPECT_TRUE(v.generation.do_sample);
  ASSERT_TRUE(v.has_tokenizer);
  EXPECT_EQ(v.chat_template, info.tokenizer->chat_template);
  EXPECT_EQ(v.tokenizer.model_token_count, info.tokenizer->model_token_count);
  EXPECT_EQ(v.tokenizer.merges.size(), info.tokenizer->merges.size());
  EXPECT_EQ(v.tokenizer.added_tokens.size(), info.tokenizer->added_tokens.size());
  EXPECT_EQ(p->tokenizer->token_count(), info.tokenizer->token_offsets.size() - 1);
  if (std::string(GetParam()) == "qwen2") {
    EXPECT_EQ(v.chat.format, llm::ChatFormat::ChatMl);
    EXPECT_TRUE(v.chat.has_default_system);
    EXPECT_EQ(v.chat.default_system, "You are a helpful assistant.");
    EXPECT_EQ(v.chat.generation_prompt, "<|im_start|>assistant\n");
  } else {
    EXPECT_EQ(v.chat.format, llm::ChatFormat::Llama3);
    EXPECT_FALSE(v.chat.has_default_system);
    EXPECT_TRUE(p->tokenizer->add_bos());
  }
}

// Every golden string of tests/data/llm/<family> (HF ids), encoded and decoded by the tokenizer
// embedded in the program and by the one read from tokenizer.json; every golden id list decoded
// (and stream-decoded) by both.
void expect_embedded_equals_json(const std::string& family) {
  const LlmProgramInfo info = make_info(family);
  const std::unique_ptr<ProgramLlm> p = load_program_llm(export_with(&info));
  ASSERT_NE(p, nullptr);
  const auto direct = lt::load_tokenizer(family);
  ASSERT_NE(direct, nullptr);
  const llm::TokenizerDesc& d = p->view.tokenizer;
  EXPECT_EQ(d.pre_tokenizer, info.tokenizer->pre_tokenizer);
  EXPECT_EQ(d.normalizer, info.tokenizer->normalizer);
  EXPECT_EQ(d.decoder, info.tokenizer->decoder);
  EXPECT_EQ(d.decoder_strip_spaces, info.tokenizer->decoder_strip_spaces);
  EXPECT_EQ(d.metaspace_prepend, info.tokenizer->metaspace_prepend);
  EXPECT_EQ(d.unk_id, info.tokenizer->unk_id);
  EXPECT_EQ(d.fuse_unk, info.tokenizer->fuse_unk);
  EXPECT_EQ(d.byte_fallback, info.tokenizer->byte_fallback);
  const llm::Tokenizer& embedded = *p->tokenizer;
  size_t cases = 0, failures = 0;
  for (const nlohmann::json& c : lt::read_jsonl(lt::data_path(family + "/golden.jsonl"))) {
    if (c.contains("decode_ids")) {
      const std::vector<int32_t> ids = c["decode_ids"].get<std::vector<int32_t>>();
      const bool ok = lt::decode(embedded, ids, false) == c["decoded"].get<std::string>() &&
                      lt::stream_decode(embedded, ids, true) == lt::decode(**direct, ids, true);
      if (!ok && ++failures <= 10) ADD_FAILURE() << family << ": decode " << c["decode_ids"].dump();
    }
    if (!c.contains("text")) continue;
    ++cases;
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> hf = c["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = lt::encode(embedded, text, false);
    const bool ok = got == hf && got == lt::encode(**direct, text, false) &&
                    lt::encode(embedded, text, true) == lt::encode(**direct, text, true) &&
                    lt::decode(embedded, hf, true) == lt::decode(**direct, hf, true);
    if (!ok && ++failures <= 10) ADD_FAILURE() << family << ": " << lt::escaped(text);
  }
  EXPECT_GT(cases, 1000u);
  EXPECT_EQ(failures, 0u);
}

TEST_P(LlmInfoRoundTrip, EmbeddedTokenizerEqualsTokenizerJson) { expect_embedded_equals_json(GetParam()); }

// The other layouts of tests/data/llm (SentencePiece: Llama-2, Mistral, Gemma; byte-level: SmolLM,
// GPT-2), whose chat templates the runtime does not render (chat_format None, except SmolLM's
// ChatML).
class LlmInfoTokenizerRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(LlmInfoTokenizerRoundTrip, EmbeddedTokenizerEqualsTokenizerJson) { expect_embedded_equals_json(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Layouts, LlmInfoTokenizerRoundTrip,
                         ::testing::Values("llama2", "mistral", "gemma", "smollm", "gpt2"));

// Ids of transformers 5.17's apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
// with the tokenizers of tests/data/llm, from tests/llm/chat_template_ids.py (run on the GPU
// machine's image). There they equal tokenizer(text, add_special_tokens=False), which is why
// render_chat's text is encoded without special tokens: the Llama-3 template writes
// <|begin_of_text|> itself.
struct ChatCase {
  bool has_system;
  const char* system;
  const char* user;
};
const ChatCase kChatCases[] = {
    {false, "", "Hello, world!"},
    {true, " Be terse.\n", "  Two\nlines \n"},
    {true, "", "hi"},
    {false, "", "  Hello, world!\n"},
    {true, "\tYou are a pirate. ", "Where is the treasure?\r\n"},
    {false, "", "caf\u00e9 \u00bfqu\u00e9 tal? 12345 \U0001F600 <|im_end|> <|eot_id|>"},
};
const std::vector<std::vector<int32_t>> kLlama3ChatIds = {
    {1200, 1206, 84, 82, 259, 1207, 993, 39, 68, 278, 78, 11, 220, 339, 75, 67, 0, 1209, 1206, 663, 82,
     712, 308, 83, 1207, 993},
    {1200, 1206, 82, 88, 294, 68, 76, 1207, 993, 33, 68, 265, 259, 319, 13, 1209, 1206, 84, 82, 259,
     1207, 993, 51, 86, 78, 198, 75, 260, 267, 1209, 1206, 663, 82, 712, 308, 83, 1207, 993},
    {1200, 1206, 82, 88, 294, 68, 76, 1207, 993, 1209, 1206, 84, 82, 259, 1207, 993, 71, 72, 1209, 1206,
     663, 82, 712, 308, 83, 1207, 993},
    {1200, 1206, 84, 82, 259, 1207, 993, 39, 68, 278, 78, 11, 220, 339, 75, 67, 0, 1209, 1206, 663, 82,
     712, 308, 83, 1207, 993},
    {1200, 1206, 82, 88, 294, 68, 76, 1207, 993, 1091, 258, 261, 258, 284, 72, 81, 783, 13, 1209, 1206,
     84, 82, 259, 1207, 993, 54, 257, 261, 1172, 270, 265, 261, 663, 671, 30, 1209, 1206, 663, 82, 712,
     308, 83, 1207, 993},
    {1200, 1206, 84, 82, 259, 1207, 993, 66, 64, 593, 285, 123, 470, 269, 265, 335, 30, 220, 497, 18,
     457, 323, 222, 220, 27, 91, 72, 76, 62, 439, 91, 29, 220, 1209, 1209, 1206, 663, 82, 712, 308, 83,
     1207, 993},
};
const std::vector<std::vector<int32_t>> kQwen2ChatIds = {
    {1151, 82, 88, 293, 68, 76, 198, 1048, 258, 261, 258, 220, 257, 75, 79, 69, 298, 258, 82, 82, 681,
     307, 83, 13, 1152, 198, 1151, 84, 82, 259, 198, 39, 68, 278, 78, 11, 220, 337, 75, 67, 0, 1152, 198,
     1151, 634, 82, 681, 307, 83, 198},
    {1151, 82, 88, 293, 68, 76, 198, 494, 68, 265, 259, 318, 377, 1152, 198, 1151, 84, 82, 259, 198, 220,
     392, 86, 78, 198, 75, 260, 267, 220, 198, 1152, 198, 1151, 634, 82, 681, 307, 83, 198},
    {1151, 82, 88, 293, 68, 76, 198, 1152, 198, 1151, 84, 82, 259, 198, 71, 72, 1152, 198, 1151, 634, 82,
     681, 307, 83, 198},
    {1151, 82, 88, 293, 68, 76, 198, 1048, 258, 261, 258, 220, 257, 75, 79, 69, 298, 258, 82, 82, 681,
     307, 83, 13, 1152, 198, 1151, 84, 82, 259, 198, 220, 220, 39, 68, 278, 78, 11, 220, 337, 75, 67, 0,
     198, 1152, 198, 1151, 634, 82, 681, 307, 83, 198},
    {1151, 82, 88, 293, 68, 76, 198, 197, 1048, 258, 261, 258, 283, 72, 81, 750, 13, 220, 1152, 198,
     1151, 84, 82, 259, 198, 54, 257, 261, 1129, 270, 265, 261, 634, 642, 30, 201, 198, 1152, 198, 1151,
     634, 82, 681, 307, 83, 198},
    {1151, 82, 88, 293, 68, 76, 198, 1048, 258, 261, 258, 220, 257, 75, 79, 69, 298, 258, 82, 82, 681,
     307, 83, 13, 1152, 198, 1151, 84, 82, 259, 198, 66, 64, 570, 284, 123, 458, 269, 265, 333, 30, 220,
     16, 17, 18, 19, 20, 322, 222, 220, 1152, 220, 27, 91, 68, 78, 83, 62, 72, 67, 91, 29, 1152, 198,
     1151, 634, 82, 681, 307, 83, 198},
};

TEST_P(LlmInfoRoundTrip, ChatPromptIdsEqualApplyChatTemplate) {
  const std::string family = GetParam();
  const LlmProgramInfo info = make_info(family);
  const std::unique_ptr<ProgramLlm> p = load_program_llm(export_with(&info));
  ASSERT_NE(p, nullptr);
  const std::vector<std::vector<int32_t>>& expected = family == "qwen2" ? kQwen2ChatIds : kLlama3ChatIds;
  ASSERT_EQ(expected.size(), std::size(kChatCases));
  for (size_t i = 0; i < expected.size(); ++i) {
    llm::ChatPrompt prompt;
    prompt.user = kChatCases[i].user;
    prompt.has_system = kChatCases[i].has_system;
    prompt.system = kChatCases[i].system;
    std::vector<char> text(llm::chat_prompt_bytes(p->view.chat, prompt));
    ErrorContext ctx;
    Result<size_t> n = llm::render_chat(p->view.chat, prompt, Span<char>(text.data(), text.size()), &ctx);
    ASSERT_TRUE(n.is_ok()) << ctx.message;
    EXPECT_EQ(lt::encode(*p->tokenizer, std::string(text.data(), *n), /*add_special_tokens=*/false), expected[i])
        << family << " case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LlmInfoRoundTrip, ::testing::Values("llama3", "qwen2"));

TEST(LlmInfoTest, ProgramWithoutLlmInfo) {
  pt::Runtime runtime;
  pt::LoadedProgram program(export_with(nullptr), runtime.context);
  ASSERT_TRUE(program.ok()) << program.ctx().message;
  const fb::Program& fbp = program.program().flatbuffer();
  EXPECT_FALSE(llm::has_llm_info(fbp));
  EXPECT_EQ(llm::llm_added_token_count(fbp), 0u);
  ErrorContext ctx;
  Result<llm::LlmProgramView> view = llm::read_llm_info(fbp, Span<llm::AddedTokenDesc>(), &ctx);
  ASSERT_FALSE(view.is_ok());
  EXPECT_EQ(view.error(), Error::NotFound);
}

// kv_bytes_per_block x the num_blocks chosen at load is exactly the KV state the Program allocates.
TEST(LlmInfoTest, KvBytesPerBlockSizesTheStateChosenAtLoad) {
  const std::vector<uint8_t>& bytes = pt::example("paged_attention").program.bytes;
  pt::Runtime runtime;
  for (int64_t blocks : {1, 6, 16}) {
    const SymbolValue symbol{"num_blocks", blocks};
    LoadOptions options;
    options.symbols = Span<const SymbolValue>(&symbol, 1);
    pt::LoadedProgram program(bytes, runtime.context, options);
    ASSERT_TRUE(program.ok()) << program.ctx().message;
    ErrorContext ctx;
    Result<llm::LlmProgramView> view = llm::read_llm_info(program.program().flatbuffer(), Span<llm::AddedTokenDesc>(), &ctx);
    ASSERT_TRUE(view.is_ok()) << ctx.message;
    const uint64_t state = program.program().find_state("kv.0.k")->nbytes + program.program().find_state("kv.0.v")->nbytes;
    EXPECT_EQ(llm::kv_bytes_per_block(view.value()) * uint64_t(blocks), state);
  }
  // More state than LoadOptions::max_state_bytes allows: OutOfMemory before any allocation.
  {
    const SymbolValue symbol{"num_blocks", 16};
    LoadOptions options;
    options.symbols = Span<const SymbolValue>(&symbol, 1);
    options.max_state_bytes = 8 * 1024 - 1;  // the two caches need 2 x 16 blocks x 256 bytes
    pt::LoadedProgram program(bytes, runtime.context, options);
    ASSERT_FALSE(program.ok());
    EXPECT_EQ(program.error(), Error::OutOfMemory);
    EXPECT_NE(std::string(program.ctx().message).find("max_state_bytes"), std::string::npos) << program.ctx().message;
    options.max_state_bytes = 8 * 1024;
    pt::LoadedProgram fits(bytes, runtime.context, options);
    EXPECT_TRUE(fits.ok()) << fits.ctx().message;
  }
  // Beyond the symbol's range: refused at load, naming it.
  const SymbolValue too_many{"num_blocks", 17};
  LoadOptions options;
  options.symbols = Span<const SymbolValue>(&too_many, 1);
  pt::LoadedProgram program(bytes, runtime.context, options);
  ASSERT_FALSE(program.ok());
  EXPECT_NE(std::string(program.ctx().message).find("symbol 'num_blocks' = 17 outside 1..16"), std::string::npos)
      << program.ctx().message;
}

TEST(LlmInfoTest, WithoutTokenizerOrGenerationDefaults) {
  LlmProgramInfo info = make_info("llama3");
  info.tokenizer.reset();
  info.temperature.reset();
  info.top_k.reset();
  info.top_p.reset();
  info.do_sample.reset();
  info.bos_id = -1;
  const std::unique_ptr<ProgramLlm> p = load_program_llm(export_with(&info));
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->view.has_tokenizer);
  EXPECT_EQ(p->view.bos_id, -1);
  EXPECT_FALSE(p->view.generation.has_temperature || p->view.generation.has_top_k || p->view.generation.has_top_p ||
               p->view.generation.has_repetition_penalty || p->view.generation.has_do_sample);
  EXPECT_EQ(p->view.chat.format, llm::ChatFormat::None);
}

TEST(LlmInfoTest, AddedTokenStorageTooSmallIsOutOfMemory) {
  const LlmProgramInfo info = make_info("llama3");
  pt::Runtime runtime;
  pt::LoadedProgram program(export_with(&info), runtime.context);
  ASSERT_TRUE(program.ok()) << program.ctx().message;
  const fb::Program& fbp = program.program().flatbuffer();
  const size_t count = llm::llm_added_token_count(fbp);
  ASSERT_EQ(count, info.tokenizer->added_tokens.size());
  std::vector<llm::AddedTokenDesc> storage(count - 1);
  ErrorContext ctx;
  Result<llm::LlmProgramView> view =
      llm::read_llm_info(fbp, Span<llm::AddedTokenDesc>(storage.data(), storage.size()), &ctx);
  ASSERT_FALSE(view.is_ok());
  EXPECT_EQ(view.error(), Error::OutOfMemory);
  EXPECT_NE(std::string(ctx.message).find(std::to_string(count) + " added tokens"), std::string::npos) << ctx.message;
}

// ---- Hostile tables: each must fail Program::load with InvalidProgram naming the field. ----

// The exported file with its LlmInfo edited through the object API (the trivial graph has no
// delegate payloads, so a plain re-pack keeps everything else as it was).
std::vector<uint8_t> with_llm_edit(const std::vector<uint8_t>& file, const std::function<void(fb::LlmInfoT&)>& edit) {
  std::unique_ptr<fb::ProgramT> program(pt::program_of(file)->UnPack());
  edit(*program->llm);
  flatbuffers::FlatBufferBuilder fbb;
  fb::FinishProgramBuffer(fbb, fb::Program::Pack(fbb, program.get()));
  const std::vector<uint8_t> flatbuffer(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  return pt::with_flatbuffer(file, flatbuffer);
}

struct HostileCase {
  const char* name;
  const char* message;  // a substring of the error
  std::function<void(fb::LlmInfoT&)> edit;
};

TEST(LlmInfoTest, HostileTablesAreInvalidProgram) {
  const LlmProgramInfo info = make_info("qwen2");
  const std::vector<uint8_t> file = export_with(&info);
  pt::Runtime runtime;
  {
    // The unedited re-pack loads: the failures below are the edits' doing.
    pt::LoadedProgram program(with_llm_edit(file, [](fb::LlmInfoT&) {}), runtime.context);
    ASSERT_TRUE(program.ok()) << program.ctx().message;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<HostileCase> cases = {
      {"offset count", "llm.tokenizer.token_offsets has",
       [](fb::LlmInfoT& l) { l.tokenizer->token_offsets.pop_back(); }},
      {"token count above vocab", "llm.tokenizer.token_count", [](fb::LlmInfoT& l) {
         l.tokenizer->token_count = static_cast<uint32_t>(l.vocab_size) + 1;
       }},
      {"token count zero", "llm.tokenizer.token_count 0", [](fb::LlmInfoT& l) { l.tokenizer->token_count = 0; }},
      {"first offset", "llm.tokenizer.token_offsets[0] is 3",
       [](fb::LlmInfoT& l) { l.tokenizer->token_offsets[0] = 3; }},
      {"offsets decrease", "llm.tokenizer.token_offsets[6] = 0 is below [5]",
       [](fb::LlmInfoT& l) { l.tokenizer->token_offsets[6] = 0; }},
      {"last offset", "but token_bytes holds", [](fb::LlmInfoT& l) { l.tokenizer->token_bytes.push_back('x'); }},
      {"model token count", "llm.tokenizer.model_token_count 0", [](fb::LlmInfoT& l) {
         l.tokenizer->model_token_count = 0;
       }},
      {"odd merges", "llm.tokenizer.merges has", [](fb::LlmInfoT& l) { l.tokenizer->merges.pop_back(); }},
      {"merge id", "llm.tokenizer.merges[3] (pair 1) = 4000000", [](fb::LlmInfoT& l) {
         l.tokenizer->merges[3] = 4000000;
       }},
      {"added id", "llm.tokenizer.added_tokens[1].id 99999 is not below token_count", [](fb::LlmInfoT& l) {
         l.tokenizer->added_tokens[1]->id = 99999;
       }},
      {"added content", "llm.tokenizer.added_tokens[0] (id ", [](fb::LlmInfoT& l) {
         l.tokenizer->added_tokens[0]->content = "";
       }},
      {"pre-tokenizer", "llm.tokenizer.pre_tokenizer 9", [](fb::LlmInfoT& l) {
         l.tokenizer->pre_tokenizer = static_cast<fb::PreTokenizerKind>(9);
       }},
      {"pre-tokenizer invalid", "llm.tokenizer.pre_tokenizer 0", [](fb::LlmInfoT& l) {
         l.tokenizer->pre_tokenizer = fb::PreTokenizerKind::Invalid;
       }},
      {"normalizer", "llm.tokenizer.normalizer 0", [](fb::LlmInfoT& l) {
         l.tokenizer->normalizer = fb::NormalizerKind::Invalid;
       }},
      {"normalizer past the last", "llm.tokenizer.normalizer 5", [](fb::LlmInfoT& l) {
         l.tokenizer->normalizer = static_cast<fb::NormalizerKind>(5);
       }},
      {"metaspace prepend", "llm.tokenizer.metaspace_prepend 0", [](fb::LlmInfoT& l) {
         l.tokenizer->metaspace_prepend = fb::MetaspacePrepend::Invalid;
       }},
      {"decoder", "llm.tokenizer.decoder 9", [](fb::LlmInfoT& l) {
         l.tokenizer->decoder = static_cast<fb::DecoderKind>(9);
       }},
      {"unk id", "llm.tokenizer.unk_id 5000", [](fb::LlmInfoT& l) { l.tokenizer->unk_id = 5000; }},
      {"negative unk id", "llm.tokenizer.unk_id -2", [](fb::LlmInfoT& l) { l.tokenizer->unk_id = -2; }},
      {"chat format", "llm.tokenizer.chat_format 7", [](fb::LlmInfoT& l) {
         l.tokenizer->chat_format = static_cast<fb::ChatFormat>(7);
       }},
      {"chat format invalid", "llm.tokenizer.chat_format 0", [](fb::LlmInfoT& l) {
         l.tokenizer->chat_format = fb::ChatFormat::Invalid;
       }},
      {"bos", "llm.tokenizer.bos_id 5000", [](fb::LlmInfoT& l) {
         l.tokenizer->add_bos = true;
         l.tokenizer->bos_id = 5000;
       }},
      {"eos id", "is outside [0, llm.vocab_size", [](fb::LlmInfoT& l) { l.eos_ids[1] = l.vocab_size; }},
      {"negative eos id", "llm.eos_ids[0] = -1", [](fb::LlmInfoT& l) { l.eos_ids[0] = -1; }},
      {"bos id", "llm.bos_id -2", [](fb::LlmInfoT& l) { l.bos_id = -2; }},
      {"vocab size", "llm.vocab_size is 0", [](fb::LlmInfoT& l) { l.vocab_size = 0; }},
      {"block size", "llm.block_size is 0", [](fb::LlmInfoT& l) { l.block_size = 0; }},
      {"max seqs", "llm.max_seqs is -1", [](fb::LlmInfoT& l) { l.max_seqs = -1; }},
      {"head dim", "llm.head_dim is 0", [](fb::LlmInfoT& l) { l.head_dim = 0; }},
      {"max tokens", "llm.max_tokens 2 is below llm.max_seqs 4", [](fb::LlmInfoT& l) { l.max_tokens = 2; }},
      {"max context", "llm.max_context 250 is not a multiple", [](fb::LlmInfoT& l) { l.max_context = 250; }},
      {"block table", "llm.max_blocks_per_seq 15", [](fb::LlmInfoT& l) { l.max_blocks_per_seq = 15; }},
      {"kv dtype", "llm.kv_dtype 8", [](fb::LlmInfoT& l) { l.kv_dtype = fb::ScalarType::I32; }},
      {"temperature", "llm.temperature nan", [nan](fb::LlmInfoT& l) { l.temperature = nan; }},
      {"negative temperature", "llm.temperature -1", [](fb::LlmInfoT& l) { l.temperature = -1.0f; }},
      {"top k", "llm.top_k -3", [](fb::LlmInfoT& l) { l.top_k = -3; }},
      {"top p", "llm.top_p 0", [](fb::LlmInfoT& l) { l.top_p = 0.0f; }},
      {"repetition penalty", "llm.repetition_penalty 0", [](fb::LlmInfoT& l) { l.repetition_penalty = 0.0f; }},
  };
  for (const HostileCase& c : cases) {
    pt::LoadedProgram program(with_llm_edit(file, c.edit), runtime.context);
    EXPECT_FALSE(program.ok()) << c.name;
    EXPECT_EQ(program.error(), Error::InvalidProgram) << c.name;
    EXPECT_NE(std::string(program.ctx().message).find(c.message), std::string::npos)
        << c.name << ": '" << program.ctx().message << "' lacks '" << c.message << "'";
  }
}

// ---- The exporter side. ----

TEST(LlmInfoTest, ExporterRefusesInconsistentInfo) {
  LlmProgramInfo info = make_info("llama3");
  info.vocab_size = 100;  // fewer rows than the tokenizer has ids
  EXPECT_THROW(export_with(&info), ExportError);
  info = make_info("llama3");
  info.eos_ids.push_back(info.vocab_size);
  EXPECT_THROW(export_with(&info), ExportError);
  info = make_info("llama3");
  info.kv_dtype = ScalarType::I8;
  EXPECT_THROW(export_with(&info), ExportError);
  info = make_info("llama3");
  info.max_context = 100;
  EXPECT_THROW(export_with(&info), ExportError);
}

// Qwen2.5-like (a tools branch that builds the system block from expressions, then a literal
// default) and Qwen3-like templates (no default system message; the Thinking-2507 variant's
// generation prompt opens a <think> block), shortened: only the parts detection looks at.
constexpr const char* kQwen25Template =
    R"({%- if tools %}{{- '<|im_start|>system\n' }}{%- if messages[0]['role'] == 'system' %})"
    R"({{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful )"
    R"(assistant.' }}{%- endif %}{{- "\n\n# Tools<|im_end|>\n" }}{%- else %}{%- if messages[0]['role'] == )"
    R"('system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- else %}{{- )"
    R"('<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }})"
    R"({%- endif %}{%- endif %}{%- for message in messages %}{%- if message.role == "user" or (message.role )"
    R"(== "system" and not loop.first) %}{{- '<|im_start|>' + message.role + '\n' + message.content + )"
    R"('<|im_end|>' + '\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- )"
    R"('<|im_start|>assistant\n' }}{%- endif %})";
constexpr const char* kQwen3Template =
    R"({%- if messages[0].role == 'system' %}{{- '<|im_start|>system\n' + messages[0].content + )"
    R"('<|im_end|>\n' }}{%- endif %}{%- for message in messages %}{%- if message.role == "user" %}{{- )"
    R"('<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endif %})"
    R"({%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking )"
    R"(is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}{%- endif %})";
constexpr const char* kQwen3ThinkingTemplate =
    R"({%- if messages[0].role == 'system' %}{{- '<|im_start|>system\n' + messages[0].content + )"
    R"('<|im_end|>\n' }}{%- endif %}{%- for message in messages %}{%- if message.role == "user" %}{{- )"
    R"('<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endif %})"
    R"({%- endfor %}{%- if add_generation_prompt %}{{- "<|im_start|>assistant\n<think>\n" }}{%- endif %})";

TEST(LlmInfoTest, DetectsChatFormats) {
  const tools::TokenizerData qwen = load_data("qwen2"), llama = load_data("llama3");
  ChatInfo c = detect_chat(qwen.chat_template, qwen.bos_token);
  EXPECT_EQ(c.format, ChatFormat::ChatMl);
  EXPECT_EQ(c.default_system, "You are a helpful assistant.");
  EXPECT_EQ(c.generation_prompt, "<|im_start|>assistant\n");

  c = detect_chat(kQwen25Template, "");
  EXPECT_EQ(c.format, ChatFormat::ChatMl);
  EXPECT_EQ(c.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(c.generation_prompt, "<|im_start|>assistant\n");

  c = detect_chat(kQwen3Template, "");
  EXPECT_EQ(c.format, ChatFormat::ChatMl);
  EXPECT_FALSE(c.default_system.has_value());
  EXPECT_EQ(c.generation_prompt, "<|im_start|>assistant\n");

  c = detect_chat(kQwen3ThinkingTemplate, "");
  EXPECT_EQ(c.format, ChatFormat::ChatMl);
  EXPECT_FALSE(c.default_system.has_value());
  EXPECT_EQ(c.generation_prompt, "<|im_start|>assistant\n<think>\n");

  c = detect_chat(llama.chat_template, llama.bos_token);
  EXPECT_EQ(c.format, ChatFormat::Llama3);
  EXPECT_FALSE(c.default_system.has_value());
  // Another BOS text, or a Llama-3.1-style dated system block: not rendered by the runtime.
  EXPECT_EQ(detect_chat(llama.chat_template, "<s>").format, ChatFormat::None);
  EXPECT_EQ(detect_chat(llama.chat_template + "{{ 'Cutting Knowledge Date: December 2023' }}", llama.bos_token).format,
            ChatFormat::None);
  EXPECT_EQ(detect_chat("", "").format, ChatFormat::None);
  EXPECT_EQ(detect_chat("{{ messages[0]['content'] }}", "").format, ChatFormat::None);
}

// Detection feeds render_chat; the expected text is what jinja2 renders from these templates as
// transformers sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks).
TEST(LlmInfoTest, ChatDetectionReachesTheRuntime) {
  struct Case {
    const char* chat_template;
    bool has_system;
    const char* expected;
  };
  const Case cases[] = {
      {kQwen25Template, false,
       "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
       "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
      {kQwen25Template, true,
       "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
      {kQwen3Template, false, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
      {kQwen3Template, true,
       "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
      {kQwen3ThinkingTemplate, false, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"},
      {kQwen3ThinkingTemplate, true,
       "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"},
  };
  for (const Case& c : cases) {
    LlmProgramInfo info = make_info("qwen2");
    info.tokenizer->chat_template = c.chat_template;
    const std::unique_ptr<ProgramLlm> p = load_program_llm(export_with(&info));
    ASSERT_NE(p, nullptr);
    llm::ChatPrompt prompt;
    prompt.user = "Hi";
    prompt.has_system = c.has_system;
    prompt.system = "S";
    std::vector<char> text(llm::chat_prompt_bytes(p->view.chat, prompt));
    Result<size_t> n = llm::render_chat(p->view.chat, prompt, Span<char>(text.data(), text.size()));
    ASSERT_TRUE(n.is_ok());
    EXPECT_EQ(std::string(text.data(), *n), c.expected);
  }
}

}  // namespace
}  // namespace ember::exporter
