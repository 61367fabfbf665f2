#include "exporter/importers/hf_llm/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <utility>

#include "tools/common/host_io.h"

namespace ember::exporter::hf {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what);
}

// The safetensors dtype names Ember takes (element sizes in bits follow from the ScalarType).
ScalarType dtype_of(const std::string& name) {
  static const std::map<std::string, ScalarType> kTypes = {
      {"F32", ScalarType::F32},        {"F16", ScalarType::F16},          {"BF16", ScalarType::BF16},
      {"F64", ScalarType::F64},        {"I8", ScalarType::I8},            {"U8", ScalarType::U8},
      {"I16", ScalarType::I16},        {"I32", ScalarType::I32},          {"I64", ScalarType::I64},
      {"BOOL", ScalarType::Bool},      {"F8_E4M3", ScalarType::F8E4M3FN}, {"F8_E5M2", ScalarType::F8E5M2},
      {"F8_E8M0", ScalarType::E8M0}};
  auto it = kTypes.find(name);
  return it == kTypes.end() ? ScalarType::Invalid : it->second;
}

constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;  // the safetensors reference's own limit

}  // namespace

int64_t SafeTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  // A regular file only (a FIFO or a device is refused, never waited on); its size bounds the header.
  std::optional<tools::RegularFile> regular;
  try {
    regular.emplace(tools::RegularFile::open(path, std::numeric_limits<uint64_t>::max()));
  } catch (const tools::HostIoError& e) {
    throw std::runtime_error(e.what());
  }
  if (regular->size() > std::numeric_limits<size_t>::max()) fail(path, "too large to map");
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->size_ = static_cast<size_t>(regular->size());
  if (file->size_ < 8) {
    fail(path, "file of " + std::to_string(file->size_) + " bytes is shorter than the 8-byte header length");
  }
  void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, regular->fd(), 0);
  regular.reset();
  if (map == MAP_FAILED) fail(path, std::string("cannot mmap: ") + std::strerror(errno));
  file->map_ = map;
  file->parse_into(static_cast<const uint8_t*>(map), file->size_, path);
  return file;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* bytes, size_t size, const std::string& name) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->parse_into(bytes, size, name);
  return file;
}

void SafetensorsFile::parse_into(const uint8_t* bytes, size_t size, const std::string& path) {
  if (size < 8) fail(path, "file of " + std::to_string(size) + " bytes is shorter than the 8-byte header length");
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | bytes[i];
  if (header > kMaxHeaderBytes || header > size - 8) {
    fail(path, "header length " + std::to_string(header) + " exceeds the file (" + std::to_string(size) +
                   " bytes) or 100 MiB");
  }
  json j;
  try {
    j = tools::parse_json(std::string_view(reinterpret_cast<const char*>(bytes + 8), static_cast<size_t>(header)),
                          path + " (header)", tools::JsonLimits{kMaxHeaderBytes, 512});
  } catch (const tools::HostIoError& e) {
    throw std::runtime_error(e.what());
  }
  if (!j.is_object()) fail(path, "header is not a JSON object");
  const uint64_t data_begin = 8 + header, data_size = size - data_begin;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) fail(path, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) fail(path, "__metadata__." + m.key() + " is not a string");
        metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const json& t = *it;
    const std::string where = "tensor '" + name + "'";
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets")) {
      fail(path, where + ": needs dtype, shape and data_offsets");
    }
    SafeTensor st;
    st.name = name;
    st.file = path;
    if (!t["dtype"].is_string()) fail(path, where + ": dtype is not a string");
    st.dtype_name = t["dtype"].get<std::string>();
    st.dtype = dtype_of(st.dtype_name);
    if (st.dtype == ScalarType::Invalid) fail(path, where + ": unsupported dtype " + st.dtype_name);
    if (!t["shape"].is_array()) fail(path, where + ": shape is not an array");
    uint64_t numel = 1;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40)) {
        fail(path, where + ": shape entry " + d.dump() + " is not a dimension");
      }
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > (uint64_t(1) << 50) / v) fail(path, where + ": shape " + t["shape"].dump() + " too large");
      numel *= v;
      st.shape.push_back(static_cast<int64_t>(v));
    }
    const json& off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      fail(path, where + ": data_offsets " + off.dump() + " is not [begin, end]");
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      fail(path, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] outside the " + std::to_string(data_size) + " data bytes");
    }
    const uint64_t bits = uint64_t(bits_of(st.dtype)) * numel;
    if (bits % 8 != 0 || end - begin != bits / 8) {
      fail(path, where + ": " + std::to_string(end - begin) + " bytes for " + st.dtype_name + " shape " +
                     t["shape"].dump() + " (needs " + std::to_string(bits / 8) + ")");
    }
    st.data = bytes + data_begin + begin;
    st.nbytes = static_cast<size_t>(end - begin);
    if (st.nbytes > 0) ranges.emplace_back(begin, end);
    tensors_.emplace(name, std::move(st));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      fail(path, "two tensors overlap at data offset " + std::to_string(ranges[i].first));
    }
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

Checkpoint Checkpoint::open(const std::string& dir, bool trust_model_folder) {
  namespace fs = std::filesystem;
  // Every file must resolve inside `dir` (symlinks followed) unless the folder is trusted.
  auto inside = [&](const std::string& name, const std::string& what) {
    try {
      tools::resolve_inside(dir, name, trust_model_folder, what, "--trust-model-folder");
    } catch (const tools::HostIoError& e) {
      throw std::runtime_error(e.what());
    }
    return (fs::path(dir) / name).string();
  };
  Checkpoint ckpt;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    json j;
    try {
      j = tools::read_json_file(inside("model.safetensors.index.json", "model folder entry"));
    } catch (const tools::HostIoError& e) {
      throw std::runtime_error(e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) fail(index.string(), "no weight_map object");
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it->is_string()) {
        fail(index.string(), "weight_map." + it.key() + " = " + tools::json_excerpt(*it) + ": expected a file name, got " +
                                 tools::json_type_name(*it));
      }
      const std::string shard = it->get<std::string>();
      if (shards.count(shard) == 0) {
        const std::string path = inside(shard, index.string() + ": weight_map." + it.key() + " names");
        shards[shard] = SafetensorsFile::open(path);
      }
      const auto& tensors = shards[shard]->tensors();
      auto t = tensors.find(it.key());
      if (t == tensors.end()) fail(index.string(), "tensor '" + it.key() + "' is not in " + shard);
      ckpt.tensors_[it.key()] = &t->second;
    }
    for (const auto& [name, file] : shards) {
      for (const auto& [tname, t] : file->tensors()) {
        if (ckpt.tensors_.count(tname) == 0 || ckpt.tensors_[tname] != &t) {
          fail(index.string(), "tensor '" + tname + "' of " + name + " is not mapped to that file by the index");
        }
      }
      ckpt.files_.push_back(file);
    }
  } else if (fs::exists(single, ec)) {
    auto file = std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(inside("model.safetensors", "model folder entry")));
    for (const auto& [name, t] : file->tensors()) ckpt.tensors_[name] = &t;
    ckpt.files_.push_back(file);
  } else {
    fail(dir, "neither model.safetensors nor model.safetensors.index.json");
  }
  return ckpt;
}

const SafeTensor* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const SafeTensor& Checkpoint::take(const std::string& name) {
  const SafeTensor* t = find(name);
  if (t == nullptr) throw std::runtime_error("checkpoint has no tensor '" + name + "'");
  if (!taken_.insert(name).second) throw std::runtime_error("tensor '" + name + "' taken twice");
  return *t;
}

std::vector<std::string> Checkpoint::leftovers() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) {
    if (taken_.count(name) == 0) out.push_back(name);
  }
  return out;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, t] : tensors_) total += t->nbytes;
  return total;
}

}  // namespace ember::exporter::hf
