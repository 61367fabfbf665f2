// Fuzz entry points for the exporter's parsers of untrusted model files. Shared by the libFuzzer
// targets (ember_fuzz_onnx, ember_fuzz_safetensors, ember_fuzz_hf_config, ember_fuzz_tokenizer:
// fuzz_exporter_main.cc) and the replay test in the default suite (fuzz_exporter_replay_test.cc).
//
// Inputs:
//   onnx_one         a serialized ONNX ModelProto -> parse_onnx_model + import_onnx_model (the
//                    importer's own shape inference and structure check included), with what
//                    --input-shape would say for symbolic inputs (every dim_param 1..8, unknown dims
//                    1). External data resolves against the per-process scratch folder, which holds
//                    `weights.bin` (256 bytes).
//   safetensors_one  the bytes of model.safetensors -> hf::Checkpoint::open(folder) (mmap, header,
//                    every tensor's bytes read).
//   hf_config_one    config.json, then optionally a NUL byte and generation_config.json (a NUL never
//                    appears in JSON text) -> hf::load_config(folder) and rope_inv_freq.
//   tokenizer_one    tokenizer.json, then optionally a NUL byte and tokenizer_config.json ->
//                    parse_tokenizer_json; when it parses, llm::Tokenizer::load and a few
//                    encode / decode / StreamDecoder calls.
// The readers that only take paths get their input as files written by write_scratch_file (one
// per-process folder under /dev/shm, or $TMPDIR when /dev/shm is not writable), so the file-reading
// code runs too.
//
// Findings (the process aborts with the input's harness and the exception): std::bad_alloc and
// std::length_error (an absurd allocation), std::logic_error (out_of_range, invalid_argument: a
// check missing), and for the ONNX importer any exception other than ExportError. A
// std::runtime_error (ExportError, TokenizerJsonError, the hf readers' errors) is the expected
// rejection. Other std::exceptions (nlohmann::json's own type errors, whose text names no file) are
// findings too (every JSON goes through tools/common/host_io's reader, whose errors name the file;
// EMBER_FUZZ_STRICT=0 in the environment counts them as `unclear` instead).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::fuzz {

// Each returns 0 (libFuzzer's convention); bad input never aborts, a finding does.
int onnx_one(const uint8_t* data, size_t size);
int safetensors_one(const uint8_t* data, size_t size);
int hf_config_one(const uint8_t* data, size_t size);
int tokenizer_one(const uint8_t* data, size_t size);

// Structure-aware mutation for ember_fuzz_onnx (libFuzzer's LLVMFuzzerCustomMutator): half the time,
// when `data` parses as a ModelProto, 1-3 edits of what the importer reads (an initializer's dims or
// data type, a node's op type, attribute numbers, input wiring, graph input dims, the opset, node
// order) with interesting values (0, -1, 2^31, 2^62, INT64_MIN, ...), re-serialized; otherwise
// `byte_mutate` (LLVMFuzzerMutate). Returns the new size (<= max_size).
size_t onnx_mutate(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                   size_t (*byte_mutate)(uint8_t*, size_t, size_t));

struct ParserStats {
  uint64_t inputs = 0;
  uint64_t accepted = 0;  // parsed (and, for the tokenizer, loaded by the runtime)
  uint64_t rejected = 0;  // a std::runtime_error naming the problem
  uint64_t unclear = 0;   // another std::exception (see above)
};
const ParserStats& onnx_stats();
const ParserStats& safetensors_stats();
const ParserStats& hf_config_stats();
const ParserStats& tokenizer_stats();
// The last rejection's message (for the replay test's checks).
const std::string& last_error();

// The per-process scratch folder (created on first use, removed at exit).
const std::string& scratch_dir();
// Writes bytes to scratch_dir()/name (replacing it) and returns the path; an empty name is not
// allowed. The one place fuzz input becomes a file: the readers that take paths go through it.
std::string write_scratch_file(const std::string& name, const uint8_t* data, size_t size);
// Removes scratch_dir()/name if it exists.
void remove_scratch_file(const std::string& name);

}  // namespace ember::fuzz
