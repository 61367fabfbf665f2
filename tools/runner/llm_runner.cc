#include "tools/runner/llm_runner.h"

#include <cmath>
#include <cstdio>
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
  std::vector<int32_t> ids;
  std::stringstream ss(o.decode);
  std::string item;
  while (ss >> item) {
    for (char& c : item) c = c == ',' ? ' ' : c;
    std::stringstream parts(item);
    std::string part;
    while (parts >> part) {
      char* end = nullptr;
      const long v = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || *end != '\0' || v < INT32_MIN || v > INT32_MAX) {
        fail("--decode: '" + part + "' is not an integer id");
      }
      ids.push_back(static_cast<int32_t>(v));
    }
  }
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
  std::unique_ptr<llm::StreamDecoder> decoder;
  llm::StopMatcher stop;
  std::string text;  // generated text shown so far (for --prompts-file, printed at the end)
  int generated = 0;
};

}  // namespace

bool wants_llm(const Options& o) {
  return !o.prompt.empty() || !o.prompts_file.empty() || !o.encode.empty() || !o.decode.empty();
}

int run_llm(const Options& o) {
  const int modes = !o.prompt.empty() + !o.prompts_file.empty() + !o.encode.empty() + !o.decode.empty();
  if (modes != 1) fail("give one of --prompt, --prompts-file, --encode, --decode");
  LoadedTokenizer tok;
  if (!o.encode.empty() || !o.decode.empty()) {
    if (!o.tokenizer.empty()) {
      load_tokenizer_file(o.tokenizer, &tok);
    } else {
      if (o.program.empty()) fail("--encode/--decode need --tokenizer FILE or --program FILE");
      auto s = open_program(o.program, o);
      const fb::Program& fbp = s->program->flatbuffer();
      if (!llm::has_llm_info(fbp)) fail(o.program + " is not an LLM program (no tokenizer); pass --tokenizer");
      std::vector<llm::AddedTokenDesc> added(llm::llm_added_token_count(fbp));
      ErrorContext ctx;
      Result<llm::LlmProgramView> view = llm::read_llm_info(fbp, Span<llm::AddedTokenDesc>(added.data(), added.size()), &ctx);
      if (!view.is_ok()) fail(view.status(), ctx, "reading the program's LLM table");
      if (!view->has_tokenizer) fail(o.program + " carries no tokenizer; pass --tokenizer");
      load_tokenizer(view->tokenizer, &tok);
      return run_tokenizer_check(o, *tok.tokenizer);
    }
    return run_tokenizer_check(o, *tok.tokenizer);
  }

  if (o.program.empty()) fail("--prompt/--prompts-file need --program FILE");
  auto session = open_program(o.program, o);
  const Program& program = *session->program;
  const fb::Program& fbp = program.flatbuffer();
  if (!llm::has_llm_info(fbp)) fail(o.program + " is not an LLM program (export a Hugging Face checkpoint folder)");
  std::vector<llm::AddedTokenDesc> added(llm::llm_added_token_count(fbp));
  ErrorContext ctx;
  Result<llm::LlmProgramView> view_r = llm::read_llm_info(fbp, Span<llm::AddedTokenDesc>(added.data(), added.size()), &ctx);
  if (!view_r.is_ok()) fail(view_r.status(), ctx, "reading the program's LLM table");
  const llm::LlmProgramView& view = view_r.value();
  if (!o.tokenizer.empty()) {
    load_tokenizer_file(o.tokenizer, &tok);
  } else if (view.has_tokenizer) {
    load_tokenizer(view.tokenizer, &tok);
  } else {
    fail(o.program + " carries no tokenizer; pass --tokenizer tokenizer.json");
  }
  const llm::Tokenizer& tokenizer = *tok.tokenizer;

  // Prompts.
  std::vector<Request> requests;
  if (!o.prompt.empty()) {
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
  for (Request& r : requests) {
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
    r.ids = encode(tokenizer, text, /*special=*/!(o.chat && view.chat.format == llm::ChatFormat::Llama3));
    if (r.ids.empty()) fail("the prompt encodes to no tokens");
    r.decoder = std::make_unique<llm::StreamDecoder>(tokenizer, /*skip_special_tokens=*/true);
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
  llm::GenerationConfig config;
  config.max_new_tokens = o.max_new_tokens;
  const bool sample_default = view.generation.has_do_sample && view.generation.do_sample;
  config.temperature = o.temperature >= 0 ? o.temperature : sample_default && view.generation.has_temperature ? view.generation.temperature : 0.0f;
  config.top_k = o.top_k >= 0 ? o.top_k : sample_default && view.generation.has_top_k ? view.generation.top_k : 0;
  config.top_p = o.top_p >= 0 ? o.top_p : sample_default && view.generation.has_top_p ? view.generation.top_p : 1.0f;
  config.repetition_penalty = o.repetition_penalty >= 0 ? o.repetition_penalty
                              : view.generation.has_repetition_penalty ? view.generation.repetition_penalty : 1.0f;
  config.seed = static_cast<int32_t>(o.seed);
  config.ignore_eos = o.ignore_eos;
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

  const bool stream = requests.size() == 1;
  std::vector<char> piece(requests[0].decoder->max_push_bytes() + 8);
  std::vector<char> shown(piece.size() + llm::StopMatcher::kMaxHold + 8);
  double prefill_s = 0, decode_s = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  auto emit = [&](Request& r, const char* data, size_t n) {
    if (stream) {
      std::fwrite(data, 1, n, stdout);
      std::fflush(stdout);
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
      if (e.finished == llm::FinishReason::Eos) continue;  // the EOS token is not shown
      if (e.token >= static_cast<int32_t>(tokenizer.token_count())) {
        // A model vocabulary larger than the tokenizer's (Qwen2.5: 151936 rows, 151665 tokens): the
        // id has no text; HF's decode skips it too.
        if (!warned_unknown) std::fprintf(stderr, "runner: note: id %d has no token in the tokenizer (%zu tokens); shown as nothing\n", e.token, tokenizer.token_count());
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
    Result<size_t> n = r.decoder->flush(Span<char>(piece.data(), piece.size()), &ctx);
    if (n.is_ok() && !r.stop.matched()) {
      const size_t m = r.stop.feed(std::string_view(piece.data(), n.value()), shown.data());
      emit(r, shown.data(), m);
      emit(r, shown.data(), r.stop.flush(shown.data()));
    }
  }
  if (stream) std::printf("\n");
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (!stream) std::printf("[%zu] %s\n", i + 1, r.text.c_str());
    if (o.print_ids) {
      const Span<const int32_t> all = engine.tokens(r.seq);
      const size_t p = static_cast<size_t>(engine.prompt_length(r.seq));
      std::printf("generated ids%s: %s\n", stream ? "" : (" [" + std::to_string(i + 1) + "]").c_str(),
                  ids_text(Span<const int32_t>(all.data() + p, all.size() - p)).c_str());
    }
    std::fprintf(stderr, "[%zu] %d tokens, finished: %s\n", i + 1, r.generated, llm::to_string(engine.finish_reason(r.seq)));
  }
  std::fprintf(stderr, "prefill: %lld tokens in %.3f s (%.1f tok/s); decode: %lld tokens in %.3f s (%.1f tok/s); "
               "%d preemption%s, %d prefix-cache tokens; %d KV blocks of %d tokens (%.1f MiB)\n",
               static_cast<long long>(prefill_tokens), prefill_s, prefill_s > 0 ? double(prefill_tokens) / prefill_s : 0.0,
               static_cast<long long>(decode_tokens), decode_s, decode_s > 0 ? double(decode_tokens) / decode_s : 0.0,
               engine.scheduler().preemptions(), engine.scheduler().preemptions() == 1 ? "" : "s",
               engine.scheduler().prefix_hit_tokens(), num_blocks, view.block_size,
               double(llm::kv_bytes_per_block(view)) * num_blocks / (1 << 20));
  return 0;
}

}  // namespace ember::runner
