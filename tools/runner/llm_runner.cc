#include "tools/runner/llm_runner.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string_view>

#include "runtime/executor/method.h"
#include "runtime/llm/engine.h"
#include "runtime/llm/program_info.h"
#include "runtime/llm/tokenizer.h"
#include "runtime/platform/platform.h"
#include "tools/common/host_io.h"
#include "tools/common/npy.h"
#include "tools/common/tokenizer_json.h"

namespace ember::runner {
namespace {

// A tokenizer from --tokenizer (tokenizer.json, plus tokenizer_config.json beside it) or from the
// program, with the memory it lives in.
struct LoadedTokenizer {
  std::optional<tools::TokenizerData> data;
  std::vector<llm::AddedTokenDesc> added;
  std::unique_ptr<AlignedBuffer> memory;
  std::optional<llm::Tokenizer> tokenizer;
};

void load_tokenizer(const llm::TokenizerDesc& desc, LoadedTokenizer* t) {
  const size_t bytes = llm::Tokenizer::memory_bytes(desc);
  t->memory = std::make_unique<AlignedBuffer>(bytes + 16, 16);
  BumpAllocator alloc(Span<uint8_t>(static_cast<uint8_t*>(t->memory->data), bytes + 16));
  ErrorContext ctx;
  Result<llm::Tokenizer> tok = llm::Tokenizer::load(desc, alloc, &ctx);
  if (!tok.is_ok()) fail(tok.status(), ctx, "cannot load the tokenizer");
  t->tokenizer.emplace(std::move(tok).value());
}

void load_tokenizer_file(const std::string& path, LoadedTokenizer* t) {
  std::string config;
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::error_code ec;
  if (std::filesystem::exists(dir + "/tokenizer_config.json", ec)) config = dir + "/tokenizer_config.json";
  try {
    t->data = tools::load_tokenizer_json(path, config);
  } catch (const std::exception& e) {
    fail(std::string("--tokenizer ") + e.what());
  }
  load_tokenizer(tools::make_tokenizer_desc(*t->data, &t->added), t);
}

std::vector<int32_t> encode(const llm::Tokenizer& tok, std::string_view text, bool special) {
  std::vector<int32_t> ids(tok.max_token_count(text.size()));
  std::vector<uint8_t> scratch(tok.encode_scratch_bytes(text.size()));
  ErrorContext ctx;
  Result<size_t> n = tok.encode(text, Span<int32_t>(ids.data(), ids.size()), Span<uint8_t>(scratch.data(), scratch.size()),
                                special, &ctx);
  if (!n.is_ok()) fail(n.status(), ctx, "encoding the prompt");
  ids.resize(n.value());
  return ids;
}

// Token ids from "1,2,3", "1 2 3" or a mix: items separated by a comma, whitespace or both. An item
// that is not a whole decimal int32 ("abc", "1.5", "1e3", "99999999999") and an empty item between
// commas ("1,,2", a comma at either end) are errors naming `flag` and the item. No ids at all gives
// an empty list (the caller decides whether that is an error).
std::vector<int32_t> parse_ids(const char* flag, const std::string& text) {
  std::vector<int32_t> ids;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const std::string& part : parts) {
    std::istringstream items(part);
    std::string item;
    size_t count = 0;
    while (items >> item) {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(item.c_str(), &end, 10);
      if (end != item.c_str() + item.size()) fail(std::string(flag) + ": '" + item + "' is not an integer id");
      if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX) {
        fail(std::string(flag) + ": '" + item + "' is not an int32 id");
      }
      ids.push_back(static_cast<int32_t>(v));
      ++count;
    }
    if (count == 0 && parts.size() > 1) {
      fail(std::string(flag) + ": an empty item in '" + text + "' (two commas in a row, or a comma at an end)");
    }
  }
  return ids;
}

std::string ids_text(Span<const int32_t> ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

int run_tokenizer_check(const Options& o, const llm::Tokenizer& tok) {
  if (!o.encode.empty()) {
    const std::vector<int32_t> ids = encode(tok, o.encode, true);
    std::printf("%s\n", ids_text(Span<const int32_t>(ids.data(), ids.size())).c_str());
    return 0;
  }
  const std::vector<int32_t> ids = parse_ids("--decode", o.decode);
  std::vector<char> text(3 * tok.max_token_bytes() * (ids.size() + 1) + 4);
  ErrorContext ctx;
  Result<size_t> n = tok.decode(Span<const int32_t>(ids.data(), ids.size()), Span<char>(text.data(), text.size()), false, &ctx);
  if (!n.is_ok()) fail(n.status(), ctx, "--decode");
  std::fwrite(text.data(), 1, n.value(), stdout);
  std::printf("\n");
  return 0;
}

struct Request {
  std::string prompt;
  std::vector<int32_t> ids;
  int32_t seq = -1;
  std::unique_ptr<llm::StreamDecoder> decoder;  // null without a tokenizer (--prompt-ids)
  llm::StopMatcher stop;
  std::string text;  // generated text shown so far (for --prompts-file, printed at the end)
  int generated = 0;
};

// The program's LlmInfo table. `view` borrows `added` (and the program): keep the struct in place.
struct ProgramLlm {
  std::vector<llm::AddedTokenDesc> added;
  llm::LlmProgramView view;
};

void read_program_llm(const fb::Program& fbp, ProgramLlm* out) {
  out->added.resize(llm::llm_added_token_count(fbp));
  ErrorContext ctx;
  Result<llm::LlmProgramView> view =
      llm::read_llm_info(fbp, Span<llm::AddedTokenDesc>(out->added.data(), out->added.size()), &ctx);
  if (!view.is_ok()) fail(view.status(), ctx, "reading the program's LLM table");
  out->view = view.value();
}

// The sampling the runner uses: the flags where given, else generation_config.json's values as the
// program stores them (temperature, top_k, top_p only when it samples: do_sample true), else greedy.
llm::GenerationConfig generation_config(const Options& o, const llm::GenerationDefaults& g) {
  llm::GenerationConfig config;
  config.max_new_tokens = o.max_new_tokens;
  const bool sample_default = g.has_do_sample && g.do_sample;
  config.temperature = o.temperature >= 0 ? o.temperature : sample_default && g.has_temperature ? g.temperature : 0.0f;
  config.top_k = o.top_k >= 0 ? o.top_k : sample_default && g.has_top_k ? g.top_k : 0;
  config.top_p = o.top_p >= 0 ? o.top_p : sample_default && g.has_top_p ? g.top_p : 1.0f;
  config.repetition_penalty = o.repetition_penalty >= 0 ? o.repetition_penalty
                              : g.has_repetition_penalty ? g.repetition_penalty : 1.0f;
  config.seed = static_cast<int32_t>(o.seed);
  config.ignore_eos = o.ignore_eos;
  return config;
}

std::string format_number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

std::string bytes_text(uint64_t bytes) {
  char text[32];
  return format_bytes(bytes, text, sizeof(text));
}

// Text from the program shown on one line: quotes, backslashes and control characters escaped
// ("\n", "\x01"), the rest (UTF-8 included) as it is.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const char* pre_tokenizer_name(llm::PreTokenizerKind kind) {
  switch (kind) {
    case llm::PreTokenizerKind::Llama3: return "Llama-3 regex";
    case llm::PreTokenizerKind::Qwen2: return "Qwen2 regex";
    case llm::PreTokenizerKind::Gpt2: return "GPT-2 regex";
    case llm::PreTokenizerKind::Gpt2Digits: return "GPT-2 regex + single digits";
    case llm::PreTokenizerKind::Whole: return "none (whole segments)";
    case llm::PreTokenizerKind::Metaspace: return "Metaspace";
    case llm::PreTokenizerKind::MetaspaceSplit: return "Metaspace, split";
    default: return "unknown";
  }
}

}  // namespace

void print_llm_info(const Program& program) {
  const fb::Program& fbp = program.flatbuffer();
  if (!llm::has_llm_info(fbp)) return;
  ProgramLlm llm_info;
  read_program_llm(fbp, &llm_info);
  const llm::LlmProgramView& v = llm_info.view;
  std::printf("llm (the program's LlmInfo; 'step' method):\n");
  // The exporter stores sizes, not the model's name: config.json's architectures / model_type are
  // not in the program.
  std::printf("  family: unknown (the program does not store the architecture)\n");
  std::printf("  vocab_size: %d (logits columns; prompt and EOS ids are below it)\n", v.vocab_size);
  std::printf("  max_context: %d tokens per sequence (prompt + generated); step: max_seqs %d, max_tokens %d\n",
              v.max_context, v.max_seqs, v.max_tokens);
  const uint64_t per_block = llm::kv_bytes_per_block(v);
  const bool kv_known = v.kv_dtype != ScalarType::Invalid && per_block > 0;
  std::printf("  kv cache: %s, %d layers x K,V x %d kv heads x head_dim %d; block_size %d tokens",
              v.kv_dtype == ScalarType::Invalid ? "unknown dtype" : to_string(v.kv_dtype), v.num_layers, v.kv_heads,
              v.head_dim, v.block_size);
  if (kv_known) {
    std::printf("; %s per block (%s per token)\n", bytes_text(per_block).c_str(),
                bytes_text(per_block / uint64_t(v.block_size > 0 ? v.block_size : 1)).c_str());
  } else {
    std::printf("; bytes per block unknown\n");
  }
  // The pool's range: the num_blocks symbol of the KV state declarations (its max is the default).
  const fb::Symbol* num_blocks = nullptr;
  uint32_t kv_states = 0;
  for (uint32_t i = 0; fbp.states() != nullptr && i < fbp.states()->size(); ++i) {
    const fb::StateDecl* decl = fbp.states()->Get(i);
    if (decl->dims() == nullptr || decl->dims()->size() == 0 || decl->dims()->Get(0)->sym() == 0) continue;
    const fb::Symbol* sym = fbp.symbols()->Get(decl->dims()->Get(0)->sym() - 1u);
    if (std::string_view(sym->name()->c_str()) != "num_blocks") continue;
    num_blocks = sym;
    ++kv_states;
  }
  const Program::State* loaded = program.find_state("kv.0.k");
  const int blocks_per_context = v.block_size > 0 ? v.max_context / v.block_size : 0;
  if (num_blocks == nullptr) {
    std::printf("  kv blocks: unknown (no state is sized by a num_blocks symbol)\n");
  } else {
    // The symbol's min is what the program accepts; the runner also needs one whole context.
    std::printf("  kv blocks: at most %lld (the default; num_blocks in [%lld, %lld], runner --kv-blocks needs >= %d: "
                "one context)",
                static_cast<long long>(num_blocks->max()), static_cast<long long>(num_blocks->min()),
                static_cast<long long>(num_blocks->max()), blocks_per_context);
    if (loaded != nullptr && kv_known) {
      std::printf("; loaded with %lld: %s in %u state tensors", static_cast<long long>(loaded->dims[0]),
                  bytes_text(per_block * uint64_t(loaded->dims[0])).c_str(), kv_states);
    }
    std::printf("\n");
  }
  std::string eos;
  for (size_t i = 0; i < v.eos_ids.size(); ++i) eos += (i ? ", " : "") + std::to_string(v.eos_ids[i]);
  std::printf("  eos ids: %s; bos id: %s\n", eos.empty() ? "none" : eos.c_str(),
              v.bos_id < 0 ? "none" : std::to_string(v.bos_id).c_str());
  if (!v.has_tokenizer) {
    std::printf("  chat template: unknown (no tokenizer embedded)\n");
    std::printf("  tokenizer: none embedded (runner needs --tokenizer tokenizer.json, or --prompt-ids)\n");
  } else {
    const llm::TokenizerDesc& t = v.tokenizer;
    switch (v.chat.format) {
      case llm::ChatFormat::ChatMl:
        std::printf("  chat template: ChatML (%zu bytes of Jinja)", v.chat_template.size());
        if (v.chat.has_default_system) std::printf(", default system message %s", quoted(v.chat.default_system).c_str());
        if (!v.chat.generation_prompt.empty()) {
          std::printf(", generation prompt %s", quoted(v.chat.generation_prompt).c_str());
        }
        std::printf("\n");
        break;
      case llm::ChatFormat::Llama3:
        std::printf("  chat template: Llama-3 (%zu bytes of Jinja)\n", v.chat_template.size());
        break;
      default:
        if (v.chat_template.empty()) {
          std::printf("  chat template: none (--chat sends the prompt as it is)\n");
        } else {
          std::printf("  chat template: present (%zu bytes of Jinja) but not a family the runtime renders (ChatML, "
                      "Llama-3): --chat sends the prompt as it is\n", v.chat_template.size());
        }
    }
    const size_t tokens = t.token_offsets.empty() ? 0 : t.token_offsets.size() - 1;
    std::printf("  tokenizer: %s BPE, pre-tokenizer %s; %zu tokens (%u BPE + %zu added), %zu merges; encode adds "
                "BOS: %s\n",
                t.decoder == llm::DecoderKind::ByteLevel ? "byte-level" : "SentencePiece-style",
                pre_tokenizer_name(t.pre_tokenizer), tokens, t.model_token_count, tokens - t.model_token_count,
                t.merges.size(), t.add_bos ? "yes" : "no");
  }
  const llm::GenerationDefaults& g = v.generation;
  auto field = [](bool has, double value) { return has ? format_number(value) : std::string("unknown"); };
  std::printf("  generation defaults (generation_config.json): temperature %s, top_k %s, top_p %s, "
              "repetition_penalty %s, do_sample %s\n",
              field(g.has_temperature, g.temperature).c_str(), field(g.has_top_k, g.top_k).c_str(),
              field(g.has_top_p, g.top_p).c_str(), field(g.has_repetition_penalty, g.repetition_penalty).c_str(),
              g.has_do_sample ? (g.do_sample ? "true" : "false") : "unknown");
  const llm::GenerationConfig c = generation_config(Options{}, g);
  if (c.temperature == 0.0f) {
    std::printf("  runner without sampling flags: greedy, repetition_penalty %s\n",
                format_number(c.repetition_penalty).c_str());
  } else {
    std::printf("  runner without sampling flags: samples at temperature %s, top_k %d, top_p %s, repetition_penalty %s\n",
                format_number(c.temperature).c_str(), c.top_k, format_number(c.top_p).c_str(),
                format_number(c.repetition_penalty).c_str());
  }
}

bool wants_llm(const Options& o) {
  return !o.prompt.empty() || !o.prompt_ids.empty() || !o.prompts_file.empty() || !o.encode.empty() ||
         !o.decode.empty();
}

int run_llm(const Options& o) {
  const int modes = !o.prompt.empty() + !o.prompt_ids.empty() + !o.prompts_file.empty() + !o.encode.empty() +
                    !o.decode.empty();
  if (modes != 1) fail("give one of --prompt, --prompt-ids, --prompts-file, --encode, --decode");
  if (!o.dump_logits.empty() && o.prompt.empty() && o.prompt_ids.empty()) {
    fail("--dump-logits takes one prompt: give --prompt or --prompt-ids (not --prompts-file, --encode or --decode)");
  }
  if (!o.prompt_ids.empty() && o.chat) fail("--chat renders text: give --prompt (--prompt-ids are used as they are)");
  LoadedTokenizer tok;
  if (!o.encode.empty() || !o.decode.empty()) {
    if (!o.tokenizer.empty()) {
      load_tokenizer_file(o.tokenizer, &tok);
    } else {
      if (o.program.empty()) fail("--encode/--decode need --tokenizer FILE or --program FILE");
      auto s = open_program(o.program, o);
      const fb::Program& fbp = s->program->flatbuffer();
      if (!llm::has_llm_info(fbp)) fail(o.program + " is not an LLM program (no tokenizer); pass --tokenizer");
      ProgramLlm info;
      read_program_llm(fbp, &info);
      if (!info.view.has_tokenizer) fail(o.program + " carries no tokenizer; pass --tokenizer");
      load_tokenizer(info.view.tokenizer, &tok);
      return run_tokenizer_check(o, *tok.tokenizer);
    }
    return run_tokenizer_check(o, *tok.tokenizer);
  }

  if (o.program.empty()) fail("--prompt/--prompt-ids/--prompts-file need --program FILE");
  auto session = open_program(o.program, o);
  const Program& program = *session->program;
  const fb::Program& fbp = program.flatbuffer();
  if (!llm::has_llm_info(fbp)) fail(o.program + " is not an LLM program (export a Hugging Face checkpoint folder)");
  ProgramLlm info;
  read_program_llm(fbp, &info);
  const llm::LlmProgramView& view = info.view;
  if (!o.tokenizer.empty()) {
    load_tokenizer_file(o.tokenizer, &tok);
  } else if (view.has_tokenizer) {
    load_tokenizer(view.tokenizer, &tok);
  } else if (o.prompt_ids.empty()) {
    fail(o.program + " carries no tokenizer; pass --tokenizer tokenizer.json (or give the prompt as --prompt-ids)");
  }
  // Null only for --prompt-ids on a program without a tokenizer: the output is then ids, not text.
  const llm::Tokenizer* tokenizer = tok.tokenizer ? &*tok.tokenizer : nullptr;
  if (tokenizer == nullptr && !o.stops.empty()) {
    fail("--stop matches text, and " + o.program + " carries no tokenizer; pass --tokenizer tokenizer.json");
  }

  // Prompts.
  std::vector<Request> requests;
  if (!o.prompt_ids.empty()) {
    requests.emplace_back();
    requests.back().ids = parse_ids("--prompt-ids", o.prompt_ids);
    if (requests.back().ids.empty()) fail("--prompt-ids: no ids in '" + o.prompt_ids + "'");
    for (int32_t id : requests.back().ids) {
      if (id < 0 || id >= view.vocab_size) {
        fail("--prompt-ids: id " + std::to_string(id) + " is outside the vocabulary (vocab_size " +
             std::to_string(view.vocab_size) + ": ids 0 to " + std::to_string(view.vocab_size - 1) + ")");
      }
    }
  } else if (!o.prompt.empty()) {
    requests.emplace_back();
    requests.back().prompt = o.prompt;
  } else {
    std::string text;
    try {
      text = tools::read_regular_file(o.prompts_file, uint64_t(64) << 20, "--prompts-file");  // a FIFO is refused
    } catch (const std::exception& e) {
      fail(e.what());
    }
    std::istringstream f(text);
    std::string line;
    while (std::getline(f, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files: the \r is not prompt text
      if (line.empty()) continue;
      requests.emplace_back();
      requests.back().prompt = line;
    }
    if (requests.empty()) fail("--prompts-file: '" + o.prompts_file + "' has no prompts (one per line)");
  }
  std::vector<std::string_view> stops(o.stops.begin(), o.stops.end());
  ErrorContext ctx;
  for (Request& r : requests) {
    if (o.prompt_ids.empty()) {
      std::string text = r.prompt;
      if (o.chat) {
        llm::ChatPrompt chat;
        chat.user = r.prompt;
        chat.has_system = !o.system.empty();
        chat.system = o.system;
        std::vector<char> out(llm::chat_prompt_bytes(view.chat, chat) + 1);
        Result<size_t> n = llm::render_chat(view.chat, chat, Span<char>(out.data(), out.size()), &ctx);
        if (!n.is_ok()) fail(n.status(), ctx, "--chat");
        text.assign(out.data(), n.value());
      }
      // A chat prompt carries its own BOS text (Llama-3); plain prompts get the tokenizer's BOS.
      r.ids = encode(*tokenizer, text, /*special=*/!(o.chat && view.chat.format == llm::ChatFormat::Llama3));
      if (r.ids.empty()) fail("the prompt encodes to no tokens");
    }
    if (tokenizer != nullptr) {
      r.decoder = std::make_unique<llm::StreamDecoder>(*tokenizer, /*skip_special_tokens=*/true);
    }
    if (!r.stop.init(Span<const std::string_view>(stops.data(), stops.size()), &ctx).is_ok()) {
      fail(Status(ctx.code), ctx, "--stop");
    }
  }

  // Engine over the loaded `step` method.
  Result<MethodMeta> meta = program.method_meta("step", &ctx);
  if (!meta.is_ok()) fail(meta.status(), ctx, "the program has no `step` method");
  MethodMemory memory(meta.value());
  Result<Method> loaded = program.load_method("step", *memory.plan, &ctx);
  if (!loaded.is_ok()) fail(loaded.status(), ctx, "cannot load method 'step'");
  Method& method = loaded.value();
  const Program::State* cache = program.find_state("kv.0.k");
  if (cache == nullptr) fail("the program has no KV cache state 'kv.0.k'");
  const int32_t num_blocks = static_cast<int32_t>(cache->dims[0]);
  llm::SchedulerLimits limits;
  limits.max_seqs = view.max_seqs;
  limits.max_tokens = view.max_tokens;
  limits.block_size = view.block_size;
  limits.max_context = view.max_context;
  limits.max_requests = static_cast<int32_t>(std::max<size_t>(requests.size(), 1));
  if (num_blocks < view.max_context / view.block_size) {
    fail("--kv-blocks " + std::to_string(num_blocks) + " holds less than one context (" +
         std::to_string(view.max_context / view.block_size) + " blocks of " + std::to_string(view.block_size) + " tokens)");
  }
  AlignedBuffer engine_memory(llm::Engine::memory_bytes(limits, num_blocks));
  llm::Engine engine;
  if (!engine.init(method, limits, num_blocks, view.vocab_size, view.eos_ids,
                   Span<uint8_t>(static_cast<uint8_t*>(engine_memory.data), llm::Engine::memory_bytes(limits, num_blocks)), &ctx)
           .is_ok()) {
    fail(Status(ctx.code), ctx, "engine");
  }
  // --dump-logits: checked, and its file opened (a temporary beside it, renamed at the end), before
  // any generation, so that a program without logits or an unwritable path fails at once.
  std::unique_ptr<tools::AtomicFile> dump;
  std::vector<float> dumped;  // [rows, vocab_size]: row i is the logits generated token i was sampled from
  if (!o.dump_logits.empty()) {
    if (!engine.has_logits()) {
      fail("--dump-logits: " + o.program + " has no 'logits' output (export it with --emit-logits)");
    }
    try {
      dump = std::make_unique<tools::AtomicFile>(o.dump_logits, "--dump-logits");
    } catch (const std::exception& e) {
      fail(e.what());
    }
    const int32_t most = std::min(o.max_new_tokens, view.max_context);
    dumped.reserve(size_t(std::min(most, 256)) * size_t(view.vocab_size));
  }
  const llm::GenerationConfig config = generation_config(o, view.generation);
  // The flags were checked when parsed (main.cc); what comes from the program's
  // generation_config.json must be usable too.
  auto refuse_default = [](const char* field, double value, const char* flag) {
    fail(std::string("the program's generation_config.json ") + field + " " + std::to_string(value) +
         " is out of range; pass " + flag);
  };
  if (!(config.temperature >= 0.0f && std::isfinite(config.temperature))) refuse_default("temperature", config.temperature, "--temperature");
  if (config.top_k < 0) refuse_default("top_k", config.top_k, "--top-k");
  if (!(config.top_p > 0.0f && config.top_p <= 1.0f)) refuse_default("top_p", config.top_p, "--top-p");
  if (!(config.repetition_penalty > 0.0f && std::isfinite(config.repetition_penalty))) {
    refuse_default("repetition_penalty", config.repetition_penalty, "--repetition-penalty");
  }
  if (o.warmup) {  // untimed: the first prompt's ids reversed, 2 new tokens, greedy
    std::vector<int32_t> ids(requests[0].ids.rbegin(), requests[0].ids.rend());
    llm::GenerationConfig warm;
    warm.max_new_tokens = 2;
    warm.ignore_eos = true;
    Result<int32_t> seq = engine.add(Span<const int32_t>(ids.data(), ids.size()), warm, &ctx);
    if (!seq.is_ok()) fail(seq.status(), ctx, "warm-up");
    while (engine.has_work()) {
      if (!engine.step(&ctx).is_ok()) fail(Status(ctx.code), ctx, "warm-up step");
    }
    engine.release(seq.value());
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Result<int32_t> seq = engine.add(Span<const int32_t>(requests[i].ids.data(), requests[i].ids.size()), config, &ctx);
    if (!seq.is_ok()) fail(seq.status(), ctx, "prompt " + std::to_string(i + 1));
    requests[i].seq = seq.value();
    if (o.print_ids) std::printf("prompt ids: %s\n", ids_text(Span<const int32_t>(requests[i].ids.data(), requests[i].ids.size())).c_str());
  }
  std::vector<int32_t> seq_request(static_cast<size_t>(limits.max_requests), -1);
  for (size_t i = 0; i < requests.size(); ++i) seq_request[static_cast<size_t>(requests[i].seq)] = static_cast<int32_t>(i);

  // One request streams its text as it comes; several are printed at the end, one line each.
  const bool stream = requests.size() == 1 && tokenizer != nullptr;
  std::vector<char> piece(tokenizer != nullptr ? requests[0].decoder->max_push_bytes() + 8 : 8);
  std::vector<char> shown(piece.size() + llm::StopMatcher::kMaxHold + 8);
  double prefill_s = 0, decode_s = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  bool line_open = false;  // the streamed text so far is not empty and does not end with '\n'
  auto emit = [&](Request& r, const char* data, size_t n) {
    if (stream) {
      std::fwrite(data, 1, n, stdout);
      std::fflush(stdout);
      if (n > 0) line_open = data[n - 1] != '\n';
    } else {
      r.text.append(data, n);
    }
  };
  bool warned_unknown = false;
  while (engine.has_work()) {
    const uint64_t t0 = platform_now_ns();
    Result<Span<const llm::TokenEvent>> events = engine.step(&ctx);
    const double dt = double(platform_now_ns() - t0) / 1e9;
    if (!events.is_ok()) fail(events.status(), ctx, "step");
    const llm::StepStats& st = engine.last_step();
    if (st.prefill_tokens > 0) {
      prefill_s += dt;
      prefill_tokens += st.prefill_tokens;
    } else {
      decode_s += dt;
    }
    decode_tokens += st.decode_tokens;
    for (const llm::TokenEvent& e : events.value()) {
      const int32_t index = seq_request[static_cast<size_t>(e.seq)];
      Request& r = requests[static_cast<size_t>(index)];
      if (e.finished == llm::FinishReason::Failed) {  // non-finite logits: no token to show
        ErrorContext why;
        fail(engine.failure(e.seq, &why), why, "prompt " + std::to_string(index + 1));
      }
      ++r.generated;
      if (dump) {  // the row this token was sampled from (before the repetition penalty)
        const Span<const float> row = engine.logits(e.seq);
        if (row.size() != size_t(view.vocab_size)) {
          fail("--dump-logits: no logits row for generated token " + std::to_string(r.generated - 1));
        }
        dumped.insert(dumped.end(), row.data(), row.data() + row.size());
      }
      if (e.finished == llm::FinishReason::Eos || tokenizer == nullptr) continue;  // the EOS token is not shown
      if (e.token >= static_cast<int32_t>(tokenizer->token_count())) {
        // A model vocabulary larger than the tokenizer's (Qwen2.5: 151936 rows, 151665 tokens): the
        // id has no text; HF's decode skips it too.
        if (!warned_unknown) std::fprintf(stderr, "runner: note: id %d has no token in the tokenizer (%zu tokens); shown as nothing\n", e.token, tokenizer->token_count());
        warned_unknown = true;
        continue;
      }
      Result<size_t> n = r.decoder->push(e.token, Span<char>(piece.data(), piece.size()), &ctx);
      if (!n.is_ok()) fail(n.status(), ctx, "detokenizing");
      const size_t m = r.stop.feed(std::string_view(piece.data(), n.value()), shown.data());
      emit(r, shown.data(), m);
      if (r.stop.matched() && e.finished == llm::FinishReason::None) engine.finish(e.seq, llm::FinishReason::Stop);
    }
  }
  for (Request& r : requests) {
    if (r.decoder == nullptr) continue;
    Result<size_t> n = r.decoder->flush(Span<char>(piece.data(), piece.size()), &ctx);
    if (n.is_ok() && !r.stop.matched()) {
      const size_t m = r.stop.feed(std::string_view(piece.data(), n.value()), shown.data());
      emit(r, shown.data(), m);
      emit(r, shown.data(), r.stop.flush(shown.data()));
    }
  }
  // What follows (the ids on stdout, the counts and speeds on stderr) starts on a line of its own,
  // also when both streams go to one file or pipe: end an unfinished text line, and flush stdout
  // before anything is written to stderr.
  if (line_open) std::printf("\n");
  std::fflush(stdout);
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (!stream && tokenizer != nullptr) std::printf("[%zu] %s\n", i + 1, r.text.c_str());
    if (o.print_ids || tokenizer == nullptr) {  // without a tokenizer the ids are the output
      const Span<const int32_t> all = engine.tokens(r.seq);
      const size_t p = static_cast<size_t>(engine.prompt_length(r.seq));
      std::printf("generated ids%s: %s\n", requests.size() == 1 ? "" : (" [" + std::to_string(i + 1) + "]").c_str(),
                  ids_text(Span<const int32_t>(all.data() + p, all.size() - p)).c_str());
    }
  }
  std::fflush(stdout);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::fprintf(stderr, "[%zu] %d tokens, finished: %s\n", i + 1, requests[i].generated,
                 llm::to_string(engine.finish_reason(requests[i].seq)));
  }
  std::fprintf(stderr, "prefill: %lld tokens in %.3f s (%.1f tok/s); decode: %lld tokens in %.3f s (%.1f tok/s); "
               "%d preemption%s, %d prefix-cache tokens; %d KV blocks of %d tokens (%.1f MiB)\n",
               static_cast<long long>(prefill_tokens), prefill_s, prefill_s > 0 ? double(prefill_tokens) / prefill_s : 0.0,
               static_cast<long long>(decode_tokens), decode_s, decode_s > 0 ? double(decode_tokens) / decode_s : 0.0,
               engine.scheduler().preemptions(), engine.scheduler().preemptions() == 1 ? "" : "s",
               engine.scheduler().prefix_hit_tokens(), num_blocks, view.block_size,
               double(llm::kv_bytes_per_block(view)) * num_blocks / (1 << 20));
  if (dump) {
    tools::NpyArray array;
    array.dtype = ScalarType::F32;
    const int64_t rows = static_cast<int64_t>(dumped.size() / size_t(view.vocab_size));
    array.dims = {rows, view.vocab_size};
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(dumped.data());
    array.data.assign(bytes, bytes + dumped.size() * sizeof(float));
    std::vector<uint8_t> file;
    std::string error;
    if (!tools::serialize_npy(array, &file, &error)) fail("--dump-logits " + o.dump_logits + ": " + error);
    try {
      dump->write(file.data(), file.size());
      dump->commit();
    } catch (const std::exception& e) {
      fail(e.what());
    }
    std::fprintf(stderr, "logits: %lld rows (one per generated token) x %d -> %s\n", static_cast<long long>(rows),
                 view.vocab_size, o.dump_logits.c_str());
  }
  return 0;
}

}  // namespace ember::runner
