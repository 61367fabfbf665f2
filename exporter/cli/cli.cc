#include "exporter/cli/cli.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "exporter/importers/builder/examples.h"
#include "exporter/importers/hf_llm/step_graph.h"
#include "exporter/importers/onnx/onnx_importer.h"
#include "exporter/pipeline.h"
#include "tools/common/host_io.h"

#ifndef EMBER_DEFAULT_MANIFEST
#define EMBER_DEFAULT_MANIFEST "capabilities.json"
#endif

namespace ember::exporter {
namespace {

constexpr const char* kTrustFlag = "--trust-model-folder";

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Numeric flags are taken as text and parsed here, strictly: the whole text is one decimal number
// (no sign where negatives are not allowed, no trailing characters), within [lo, hi]; anything else
// is an error naming the flag and the text. (CLI11 clamps an out-of-range integer to the type's
// limit and prints its range check with the double's full bounds.)
template <typename Int>
Int parse_int_flag(const std::string& flag, const std::string& text, Int lo, Int hi) {
  Int v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && ptr == end && (v < lo || v > hi))) {
    const bool low = ec == std::errc() ? v < lo : text[0] == '-';
    throw CLI::ValidationError(flag + " " + text + ": " + (low ? "below the minimum " + std::to_string(lo)
                                                               : "above the limit " + std::to_string(hi)));
  }
  if (ec != std::errc() || ptr != end) {
    throw CLI::ValidationError(flag + " '" + text + "': not an integer (expected " + std::to_string(lo) + " to " +
                               std::to_string(hi) + ")");
  }
  return v;
}

// A finite number > 0.
float parse_positive_float_flag(const std::string& flag, const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && ptr == end && !std::isfinite(v))) v = NAN;
  else if (ec != std::errc() || ptr != end) throw CLI::ValidationError(flag + " '" + text + "': not a number");
  if (!(v > 0) || !std::isfinite(static_cast<float>(v))) {
    throw CLI::ValidationError(flag + " " + text + ": must be a finite number > 0");
  }
  return static_cast<float>(v);
}

// --compile-spec BACKEND:KEY=VALUE: split at the first ':' and the first '=' after it (the value may
// hold either); BACKEND and KEY must not be empty, VALUE may.
CompileSpecOption parse_compile_spec(const std::string& text) {
  const size_t colon = text.find(':');
  const size_t eq = colon == std::string::npos ? std::string::npos : text.find('=', colon + 1);
  const char* why = colon == std::string::npos ? "no ':'"
                    : eq == std::string::npos  ? "no '=' after the ':'"
                    : colon == 0               ? "empty BACKEND"
                    : eq == colon + 1          ? "empty KEY"
                                               : nullptr;
  if (why != nullptr) {
    throw CLI::ValidationError("--compile-spec '" + text + "': expected BACKEND:KEY=VALUE (" + why + ")");
  }
  CompileSpecOption spec;
  spec.backend = text.substr(0, colon);
  spec.key = text.substr(colon + 1, eq - colon - 1);
  spec.value.assign(text.begin() + static_cast<std::ptrdiff_t>(eq) + 1, text.end());
  return spec;
}

// quant.json + <i>.codes.bin / <i>.scale.bin per quantized constant (tests compare them with numpy).
// Each file is written atomically and never over a file the export read (tools/common/host_io.h).
void dump_quantized(const Graph& graph, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw ExportError("--quantize-dump " + dir + ": cannot create the folder: " + ec.message());
  nlohmann::json list = nlohmann::json::array();
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    tools::write_file_atomically((std::filesystem::path(dir) / name).string(), bytes.data(), bytes.size(),
                                 "--quantize-dump");
  };
  for (const Value& v : graph.values) {
    if (!v.quant) continue;
    const std::string base = std::to_string(list.size());
    write(base + ".codes.bin", *v.data);
    write(base + ".scale.bin", *v.quant->scale);
    nlohmann::json e = {{"value", v.name},
                        {"dtype", to_string(v.dtype)},
                        {"dims", {v.dims[0].max, v.dims[1].max}},
                        {"block", v.quant->block},
                        {"layout", to_string(quant_layout(v))},
                        {"scale_dtype", to_string(v.quant->scale_dtype)},
                        {"scale_dims", v.quant->scale_dims},
                        {"codes", base + ".codes.bin"},
                        {"scale", base + ".scale.bin"}};
    if (v.quant->has_global_scale) e["global_scale"] = v.quant->global_scale;
    list.push_back(std::move(e));
  }
  const std::string text = list.dump(1) + "\n";
  tools::write_file_atomically((std::filesystem::path(dir) / "quant.json").string(), text.data(), text.size(),
                               "--quantize-dump");
}

// The LlmInfo table of an imported checkpoint: sizes, ids, generation defaults and the folder's
// tokenizer (tokenizer.json + tokenizer_config.json), when it has one.
LlmProgramInfo llm_program_info(const hf::StepImport& imported, const std::string& dir, const hf::StepOptions& options,
                                std::string* summary) {
  const hf::LlmConfig& c = imported.config;
  LlmProgramInfo info;
  info.vocab_size = static_cast<int32_t>(c.vocab_size);
  info.block_size = static_cast<int32_t>(options.block_size);
  info.max_seqs = static_cast<int32_t>(options.max_seqs);
  info.max_tokens = static_cast<int32_t>(options.max_tokens);
  info.max_context = static_cast<int32_t>(imported.max_context);
  info.max_blocks_per_seq = static_cast<int32_t>(imported.max_blocks);
  info.num_layers = static_cast<int32_t>(c.num_layers);
  info.kv_heads = static_cast<int32_t>(c.num_kv_heads);
  info.head_dim = static_cast<int32_t>(c.head_dim);
  info.kv_dtype = imported.kv_dtype;
  for (int64_t id : c.eos_token_ids) info.eos_ids.push_back(static_cast<int32_t>(id));
  info.bos_id = static_cast<int32_t>(c.bos_token_id);
  info.temperature = static_cast<float>(c.temperature);
  info.top_k = static_cast<int32_t>(c.top_k);
  info.top_p = static_cast<float>(c.top_p);
  info.repetition_penalty = static_cast<float>(c.repetition_penalty);
  info.do_sample = c.do_sample;
  const std::filesystem::path folder(dir);
  std::error_code ec;
  if (std::filesystem::exists(folder / "tokenizer.json", ec)) {
    const std::filesystem::path config = folder / "tokenizer_config.json";
    const bool has_config = std::filesystem::exists(config, ec);
    // Both must resolve inside the folder (symlinks followed) unless it is trusted.
    tools::resolve_inside(dir, "tokenizer.json", options.trust_model_folder, "model folder entry", kTrustFlag);
    if (has_config) {
      tools::resolve_inside(dir, "tokenizer_config.json", options.trust_model_folder, "model folder entry", kTrustFlag);
    }
    info.tokenizer = tools::load_tokenizer_json((folder / "tokenizer.json").string(), has_config ? config.string() : "");
    *summary += "tokenizer: " + std::to_string(info.tokenizer->token_offsets.size() - 1) + " tokens, " +
                std::to_string(info.tokenizer->merges.size()) + " merges embedded\n";
  } else {
    *summary += "tokenizer: none (no tokenizer.json in the folder; runner then needs --tokenizer)\n";
  }
  return info;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"Ember exporter: turns an ONNX model, a Hugging Face LLM checkpoint folder (Llama, Qwen2, Qwen3) or a "
               "bundled example into a .pte program", "exporter"};
  std::string model, example, output, backends = kPortableBackend, manifest_path;
  std::vector<std::string> input_shapes, input_values, compile_spec_texts;
  std::vector<CompileSpecOption> compile_specs;
  bool strip_debug = false, no_fold = false, allow_non_finite = false, no_conv_clamp_fusion = false;
  std::string quantize, quantize_dump;
  std::vector<std::string> quantize_include, quantize_exclude;
  hf::StepOptions llm_options;
  std::string kv_dtype;
  // Numeric flags as text (parse_int_flag), with their defaults.
  std::string seed_text = "1", quantize_min_size_text = "128", quantize_samples_text = "1";
  std::string max_seqs_text = std::to_string(llm_options.max_seqs), max_tokens_text = std::to_string(llm_options.max_tokens);
  std::string max_context_text, block_size_text = std::to_string(llm_options.block_size), kv_scale_text = "1";
  uint64_t seed = 1;
  int64_t quantize_min_size = 128;
  int quantize_samples = 1;
  app.add_option("model", model,
                 "the .onnx file to export (external data files are read from its folder), or a Hugging Face "
                 "checkpoint folder (config.json, *.safetensors, tokenizer.json): an LLM `step` program");
  app.add_option("--max-seqs", max_seqs_text, "LLM: sequences per step (S), 1.." + std::to_string(hf::kMaxStepSeqs))
      ->capture_default_str()
      ->type_name("INT");
  app.add_option("--max-tokens", max_tokens_text,
                 "LLM: tokens per step (T, prefill chunk + decodes), max-seqs.." + std::to_string(hf::kMaxStepTokens))
      ->capture_default_str()
      ->type_name("INT");
  app.add_option("--max-context", max_context_text,
                 "LLM: tokens per sequence, 1.." + std::to_string(hf::kMaxStepContext) +
                     " (default min(max_position_embeddings, 4096)); max-seqs x max-context must fit int32")
      ->type_name("INT");
  app.add_option("--block-size", block_size_text, "LLM: tokens per KV cache block, 1.." + std::to_string(hf::kMaxBlockSize))
      ->capture_default_str()
      ->type_name("INT");
  app.add_option("--kv-dtype", kv_dtype, "LLM: KV cache dtype f32, f16, bf16 or fp8 (default: the checkpoint's)");
  app.add_option("--kv-scale", kv_scale_text, "LLM: FP8 KV cache scale (stored = e4m3(x / scale)), finite and > 0")
      ->capture_default_str()
      ->type_name("FLOAT");
  app.add_flag("--allow-non-finite-weights", allow_non_finite,
               "export weights that hold NaN or Inf (refused by default: the error names the tensors; with this "
               "flag a warning does)");
  app.add_flag("--emit-logits", llm_options.emit_logits,
               "LLM: also output logits [S, vocab] f32 from `step` (for comparing with reference logits; "
               "generation needs only the sampled ids, and the logits are the largest output of a step)");
  bool no_logprobs = false;
  app.add_flag("--no-logprobs", no_logprobs,
               "LLM: no logprobs [S] output from `step` (a step then returns only the S sampled ids)");
  bool trust_model_folder = false;
  app.add_flag("--trust-model-folder", trust_model_folder,
               "the model's folder is trusted: files it names (ONNX external data, safetensors shards) and its "
               "fixed files (config.json, tokenizer.json, ...) may be symlinks or paths that resolve outside it, "
               "absolute paths included; without it they must resolve inside the folder");
  app.add_option("--example", example, "bundled model to export instead: mlp or cnn");
  // Required, checked after parsing (CLI11 would report a missing -o before an unknown flag).
  app.add_option("-o,--output", output, "the .pte file to write (required)");
  app.add_option("--input-value", input_values,
                 "fix an ONNX graph input to constant values at export, NAME=V[,V...] (repeatable): it leaves the "
                 "program's inputs, and an If that depends only on it is taken at export")
      ->type_name("NAME=V[,V...]");
  app.add_option("--input-shape", input_shapes,
                 "NAME=DIMS for an ONNX input, DIMS joined by 'x', each a size, SYM:MIN..MAX, SYM:MAX or SYM "
                 "(e.g. input=batch:1..8x3x224x224); repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--backends", backends, "backend priority list, e.g. null,portable (portable is always the fallback)")
      ->capture_default_str();
  app.add_option("--compile-spec", compile_spec_texts,
                 "BACKEND:KEY=VALUE, attached to every delegate the partitioner gives BACKEND (which must be in "
                 "--backends and get one), e.g. cuda:buckets.tokens=1,2,4,8,16,32,64 (the backend's README lists "
                 "its keys); repeatable, each key once per backend")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--manifest", manifest_path,
                 std::string("capability manifest (default ") + EMBER_DEFAULT_MANIFEST + ")");
  app.add_option("--seed", seed_text, "seed of the example's weights (0..2^64-1)")->capture_default_str()
      ->type_name("INT");
  app.add_flag("--strip-debug", strip_debug, "omit the debug segment (node names, source ops)");
  bool quiet = false, verbose = false;
  app.add_flag("--quiet,-q", quiet, "print only the first line (source -> output), warnings and errors");
  app.add_flag("--verbose,-v", verbose, "also list every instruction with the backend that runs it");
  app.add_flag("--no-fold", no_fold, "skip constant folding");
  app.add_flag("--no-conv-clamp-fusion", no_conv_clamp_fusion,
               "keep relu / clip after conv2d as their own instructions (by default they become the conv's "
               "output clamp; the results are the same)");
  app.add_option("--quantize", quantize,
                 "quantize linear weights: fp8 (per channel), fp8-block (128x128), fp8-dynamic (W8A8, FP8 "
                 "activations per token), mxfp8, nvfp4 (exporter/passes/quantize.h)");
  app.add_option("--quantize-include", quantize_include,
                 "quantize only linears whose node name matches this glob (overrides --quantize-min-size); repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--quantize-exclude", quantize_exclude, "keep linears whose node name matches this glob in f32; repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--quantize-min-size", quantize_min_size_text, "skip linears with min(N, K) below this (>= 0)")
      ->capture_default_str()
      ->type_name("INT");
  app.add_option("--quantize-samples", quantize_samples_text,
                 "random sample inputs for the per-layer output SQNR, 0..1024 (0 = weight SQNR only)")
      ->capture_default_str()
      ->type_name("INT");
  app.add_option("--quantize-dump", quantize_dump,
                 "write each quantized weight's codes and scales (raw little-endian) and quant.json to this folder");
  app.set_version_flag("--version", std::string(kProducer));
  try {
    app.parse(argc, argv);
    if (model.empty() == example.empty()) {
      throw CLI::ValidationError("give either an ONNX model file or --example (not both)");
    }
    if (!example.empty() && !input_shapes.empty()) throw CLI::ValidationError("--input-shape applies to ONNX models only");
    if (!example.empty() && !input_values.empty()) throw CLI::ValidationError("--input-value applies to ONNX models only");
    if (quiet && verbose) throw CLI::ValidationError("--quiet and --verbose exclude each other");
    const bool is_llm = !model.empty() && std::filesystem::is_directory(model);
    for (const char* name : {"--max-seqs", "--max-tokens", "--max-context", "--block-size", "--kv-dtype", "--kv-scale",
                             "--emit-logits", "--no-logprobs"}) {
      if (!is_llm && app.count(name) > 0) {
        throw CLI::ValidationError(std::string(name) + " applies to Hugging Face checkpoint folders only");
      }
    }
    llm_options.emit_logprobs = !no_logprobs;
    llm_options.trust_model_folder = trust_model_folder;
    if (!example.empty() && trust_model_folder) throw CLI::ValidationError("--trust-model-folder applies to a model file or folder only");
    seed = parse_int_flag<uint64_t>("--seed", seed_text, 0, UINT64_MAX);
    quantize_min_size = parse_int_flag<int64_t>("--quantize-min-size", quantize_min_size_text, 0, INT64_MAX);
    quantize_samples = parse_int_flag<int>("--quantize-samples", quantize_samples_text, 0, 1024);
    llm_options.max_seqs = parse_int_flag<int64_t>("--max-seqs", max_seqs_text, 1, hf::kMaxStepSeqs);
    llm_options.max_tokens = parse_int_flag<int64_t>("--max-tokens", max_tokens_text, 1, hf::kMaxStepTokens);
    if (app.count("--max-context") > 0) {
      llm_options.max_context = parse_int_flag<int64_t>("--max-context", max_context_text, 1, hf::kMaxStepContext);
    }
    llm_options.block_size = parse_int_flag<int64_t>("--block-size", block_size_text, 1, hf::kMaxBlockSize);
    llm_options.kv_scale = parse_positive_float_flag("--kv-scale", kv_scale_text);
    for (const std::string& text : compile_spec_texts) compile_specs.push_back(parse_compile_spec(text));
    if (quantize.empty() && (!quantize_include.empty() || !quantize_exclude.empty() || !quantize_dump.empty())) {
      throw CLI::ValidationError("--quantize-include/--quantize-exclude/--quantize-dump need --quantize");
    }
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    out << kProducer << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "exporter: error: " << e.what() << " (see --help)\n";
    return 1;
  } catch (const std::bad_alloc&) {
    err << "exporter: out of memory while parsing the command line\n";
    return 1;
  }
  if (output.empty()) {
    err << "exporter: error: --output is required (see --help)\n";
    return 1;
  }
  // What the exporter is doing, for the out-of-memory line (a bad_alloc says nothing by itself).
  std::string stage = "starting";
  try {
    // Every file the export reads is noted, so that -o can never replace one of them.
    tools::ReadLog inputs;
    if (!model.empty()) tools::refuse_same_file(output, model, "-o");
    const auto start = std::chrono::steady_clock::now();
    ExportOptions options;
    options.backends = split_list(backends);
    if (options.backends.empty()) throw ExportError("--backends is empty");
    options.strip_debug = strip_debug;
    options.compile_specs = compile_specs;
    options.fold_constants = !no_fold;
    options.fuse_conv_clamps = !no_conv_clamp_fusion;
    options.allow_non_finite_weights = allow_non_finite;
    if (!quantize.empty()) {
      QuantizeOptions q;
      q.preset = parse_quant_preset(quantize);
      q.include = quantize_include;
      q.exclude = quantize_exclude;
      q.min_size = quantize_min_size;
      q.random_samples = quantize_samples;
      options.quantize = q;
    }
    stage = "reading the capability manifest";
    std::optional<CapabilityManifest> manifest;
    std::string warning;
    if (!manifest_path.empty()) {
      manifest = CapabilityManifest::load(manifest_path);
    } else if (std::filesystem::exists(EMBER_DEFAULT_MANIFEST)) {
      manifest = CapabilityManifest::load(EMBER_DEFAULT_MANIFEST);
    } else {
      for (const std::string& b : options.backends) {
        if (b != kPortableBackend) {
          throw ExportError(std::string("no capability manifest at ") + EMBER_DEFAULT_MANIFEST +
                            ": backend '" + b + "' needs one (pass --manifest)");
        }
      }
      warning = std::string("exporter: warning: no capability manifest at ") + EMBER_DEFAULT_MANIFEST +
                "; assuming portable kernels for every op (pass --manifest to check)\n";
    }
    if (manifest) options.manifest = &*manifest;

    Graph graph;
    std::string import_summary, source;
    LlmProgramInfo llm_info;
    if (!model.empty() && std::filesystem::is_directory(model)) {
      if (!kv_dtype.empty()) {
        if (kv_dtype != "f32" && kv_dtype != "f16" && kv_dtype != "bf16" && kv_dtype != "fp8") {
          throw ExportError("--kv-dtype '" + kv_dtype + "': expected f32, f16, bf16 or fp8");
        }
        llm_options.kv_dtype = kv_dtype == "fp8" ? ScalarType::F8E4M3FN : parse_dtype(kv_dtype);
      }
      if (isatty(fileno(stderr))) llm_options.progress = &err;  // a bar only for a person watching
      if (options.quantize) options.quantize->random_samples = 0;  // token-id inputs: weight SQNR only
      stage = "importing the checkpoint '" + model + "'";
      hf::StepImport imported = hf::import_step(model, llm_options);
      stage = "reading the tokenizer of '" + model + "'";
      llm_info = llm_program_info(imported, model, llm_options, &import_summary);
      options.llm = &llm_info;
      options.method_name = "step";
      import_summary = imported.summary + import_summary;
      graph = std::move(imported.graph);
      source = "'" + model + "'";
    } else if (!model.empty()) {
      OnnxImportOptions import_options;
      import_options.input_shapes = parse_input_shapes(input_shapes);
      for (const std::string& text : input_values) import_options.input_values.push_back(parse_input_value(text));
      import_options.trust_model_folder = trust_model_folder;
      import_options.allow_non_finite_weights = allow_non_finite;
      stage = "importing '" + model + "'";
      OnnxImport imported = import_onnx_file(model, import_options);
      import_summary = format_import_summary(imported.stats);
      graph = std::move(imported.graph);
      source = "'" + model + "'";
    } else {
      stage = "building the example '" + example + "'";
      graph = build_example(example, seed);
      source = "example '" + example + "' (seed " + std::to_string(seed) + ")";
    }
    std::string symbols;
    for (const Symbol& sym : graph.symbols) {
      if (!sym.derived) symbols += (symbols.empty() ? "" : ", ") + sym.name + " " + std::to_string(sym.min) + ".." + std::to_string(sym.max);
    }
    std::string pipeline_stage;
    options.stage = &pipeline_stage;
    stage = "exporting";
    ExportResult result = [&] {
      try {
        return export_graph(std::move(graph), options);
      } catch (const std::bad_alloc&) {
        stage = "exporting (" + pipeline_stage + ")";
        throw;
      }
    }();
    stage = "writing the output";
    if (!quantize_dump.empty()) dump_quantized(result.graph, quantize_dump);
    // Atomic: a temporary file beside the output, renamed over it only once fully written.
    tools::write_file_atomically(output, result.program.bytes.data(), result.program.bytes.size(), "-o",
                                 model.empty() ? std::vector<std::string>{} : std::vector<std::string>{model});
    err << warning;
    for (const std::string& w : result.warnings) err << "exporter: warning: " << w << "\n";
    out << "exporter: " << source << " -> " << output << "\n";
    if (quiet) return 0;
    out << import_summary;
    out << "manifest: " << (manifest ? manifest->source() : std::string("none")) << "; backends: " << backends << "\n";
    if (!compile_spec_texts.empty()) {
      out << "compile specs:";
      for (const std::string& text : compile_spec_texts) out << " " << text;
      out << "\n";
    }
    if (!symbols.empty()) out << "symbols: " << symbols << "\n";
    if (result.quantize) out << format_quantize_report(*result.quantize);
    out << format_summary(result, verbose);
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char buf[96];
    std::snprintf(buf, sizeof(buf), "total: %.1f ms\n", total * 1e3);
    out << buf;
    return 0;
  } catch (const std::bad_alloc& e) {
    err << "exporter: out of memory while " << stage << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "exporter: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ember::exporter
