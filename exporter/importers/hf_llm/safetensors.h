// Reading Hugging Face checkpoints' weights: safetensors files (one, or sharded with
// model.safetensors.index.json), memory-mapped, every header field checked before a byte of data is
// used. Host-only (exporter): errors are std::runtime_error naming the file, the tensor and the field.
//
// Format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N bytes of
// JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// data; offsets are relative to the end of the header, and a tensor's bytes are
// [8 + N + begin, 8 + N + end).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/scalar_type.h"

namespace ember::exporter::hf {

struct SafeTensor {
  std::string name;
  std::string file;            // the file it came from (for messages)
  ScalarType dtype = ScalarType::Invalid;
  std::string dtype_name;      // as written: "BF16", "F8_E4M3", ...
  std::vector<int64_t> shape;  // [] for a scalar
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
};

// One memory-mapped safetensors file.
class SafetensorsFile {
 public:
  // Maps `path`: a regular file (a FIFO or device is refused without blocking); the header length
  // is bounded by the file size and 100 MiB, its JSON by 512 levels of nesting.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses a whole file image held by the caller (8-byte length, header, data), with the same
  // checks; `name` prefixes messages. The tensors point into `bytes`, which must outlive the
  // result. The fuzzers' entry point.
  static std::unique_ptr<SafetensorsFile> parse(const uint8_t* bytes, size_t size, const std::string& name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse_into(const uint8_t* bytes, size_t size, const std::string& name);
  void* map_ = nullptr;  // null when parse() was given the bytes
  size_t size_ = 0;
  std::map<std::string, SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint folder, each to be taken exactly once: `take` marks a tensor consumed,
// `leftovers` lists the ones nobody took (the importer fails naming them).
class Checkpoint {
 public:
  // dir/model.safetensors, or the shards dir/model.safetensors.index.json names (every tensor in
  // the index must be in the shard it names, and every tensor of a shard in the index). Every file
  // must resolve inside `dir` (symlinks followed; no "..", no absolute shard names) unless
  // `trust_model_folder` (exporter --trust-model-folder).
  static Checkpoint open(const std::string& dir, bool trust_model_folder = false);

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const SafeTensor& take(const std::string& name);  // throws naming the tensor when it is missing
  const SafeTensor* find(const std::string& name) const;
  std::vector<std::string> leftovers() const;
  size_t size() const { return tensors_.size(); }
  uint64_t total_bytes() const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafeTensor*> tensors_;
  std::set<std::string> taken_;
};

}  // namespace ember::exporter::hf
