#include "exporter/importers/onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <limits>

#include "onnx.pb.h"
#include "tools/common/host_io.h"

namespace ember::exporter {
namespace {

namespace fs = std::filesystem;

// Bytes per element in ONNX's own encoding (raw_data); 0 for types without a fixed size here.
size_t onnx_elem_size(int32_t t) {
  switch (static_cast<OnnxDataType>(t)) {
    case OnnxDataType::Float: case OnnxDataType::Int32: case OnnxDataType::Uint32: return 4;
    case OnnxDataType::Double: case OnnxDataType::Int64: case OnnxDataType::Uint64:
    case OnnxDataType::Complex64: return 8;
    case OnnxDataType::Complex128: return 16;
    case OnnxDataType::Float16: case OnnxDataType::Bfloat16: case OnnxDataType::Int16:
    case OnnxDataType::Uint16: return 2;
    case OnnxDataType::Uint8: case OnnxDataType::Int8: case OnnxDataType::Bool:
    case OnnxDataType::Float8E4M3FN: case OnnxDataType::Float8E4M3FNUZ: case OnnxDataType::Float8E5M2:
    case OnnxDataType::Float8E5M2FNUZ: case OnnxDataType::Float8E8M0: return 1;
    default: return 0;
  }
}

std::vector<uint8_t> read_external(const onnx::TensorProto& tensor, const TensorReadOptions& options,
                                   const std::string& what, uint64_t expected_bytes) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  // Decimal digits only: stoull would take "-1" (as 2^64 - 1), "+3" and "12abc".
  auto number = [&](const std::string& key, const std::string& text) {
    uint64_t v = 0;
    bool ok = !text.empty() && text.size() <= 20;
    for (char c : text) {
      if (c < '0' || c > '9' || v > (std::numeric_limits<uint64_t>::max() - uint64_t(c - '0')) / 10) {
        ok = false;
        break;
      }
      v = v * 10 + uint64_t(c - '0');
    }
    if (!ok) throw ExportError(what + ": external_data '" + key + "' = '" + text + "' is not a byte count");
    return v;
  };
  for (const auto& kv : tensor.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      offset = number(kv.key(), kv.value());
    } else if (kv.key() == "length") {
      const uint64_t v = number(kv.key(), kv.value());
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) {
        throw ExportError(what + ": external_data 'length' = '" + kv.value() + "' is not a byte count");
      }
      length = static_cast<int64_t>(v);
    } else if (kv.key() == "checksum") {
      // SHA-1 of the data; not verified (the .pte carries its own xxh64 per segment).
    } else {
      throw ExportError(what + ": unknown external_data key '" + kv.key() + "'");
    }
  }
  if (location.empty()) throw ExportError(what + ": external data without a 'location'");
  if (length >= 0 && static_cast<uint64_t>(length) != expected_bytes) {
    throw ExportError(what + ": external data length " + std::to_string(length) + " but the tensor needs " +
                      std::to_string(expected_bytes) + " bytes");
  }
  const std::string base = options.base_dir.empty() ? std::string(".") : options.base_dir;
  const std::string path = (fs::path(base) / location).string();
  std::vector<uint8_t> bytes;
  try {
    // Inside the model's folder once symlinks are resolved (no "..", no absolute path), unless trusted;
    // a regular file; [offset, offset + bytes) inside it (RegularFile::read_at checks without overflow).
    tools::resolve_inside(base, location, options.trust_model_folder, what + ": external data location",
                          "--trust-model-folder");
    const tools::RegularFile file = tools::RegularFile::open(path, std::numeric_limits<uint64_t>::max(),
                                                             what + ": external data file");
    if (offset > file.size() || expected_bytes > file.size() - offset) {
      throw ExportError(what + ": external data [" + std::to_string(offset) + ", +" + std::to_string(expected_bytes) +
                        ") is outside '" + path + "' (" + std::to_string(file.size()) + " bytes)");
    }
    bytes.resize(expected_bytes);  // only now: the file holds that many bytes
    file.read_at(offset, bytes.data(), bytes.size());
  } catch (const tools::HostIoError& e) {
    throw ExportError(e.what());
  }
  return bytes;
}

template <typename T>
void put(std::vector<uint8_t>& out, size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

std::string onnx_dtype_name(int32_t t) {
  switch (static_cast<OnnxDataType>(t)) {
    case OnnxDataType::Undefined: return "UNDEFINED";
    case OnnxDataType::Float: return "FLOAT";
    case OnnxDataType::Uint8: return "UINT8";
    case OnnxDataType::Int8: return "INT8";
    case OnnxDataType::Uint16: return "UINT16";
    case OnnxDataType::Int16: return "INT16";
    case OnnxDataType::Int32: return "INT32";
    case OnnxDataType::Int64: return "INT64";
    case OnnxDataType::String: return "STRING";
    case OnnxDataType::Bool: return "BOOL";
    case OnnxDataType::Float16: return "FLOAT16";
    case OnnxDataType::Double: return "DOUBLE";
    case OnnxDataType::Uint32: return "UINT32";
    case OnnxDataType::Uint64: return "UINT64";
    case OnnxDataType::Complex64: return "COMPLEX64";
    case OnnxDataType::Complex128: return "COMPLEX128";
    case OnnxDataType::Bfloat16: return "BFLOAT16";
    case OnnxDataType::Float8E4M3FN: return "FLOAT8E4M3FN";
    case OnnxDataType::Float8E4M3FNUZ: return "FLOAT8E4M3FNUZ";
    case OnnxDataType::Float8E5M2: return "FLOAT8E5M2";
    case OnnxDataType::Float8E5M2FNUZ: return "FLOAT8E5M2FNUZ";
    case OnnxDataType::Uint4: return "UINT4";
    case OnnxDataType::Int4: return "INT4";
    case OnnxDataType::Float4E2M1: return "FLOAT4E2M1";
    case OnnxDataType::Float8E8M0: return "FLOAT8E8M0";
    case OnnxDataType::Uint2: return "UINT2";
    case OnnxDataType::Int2: return "INT2";
  }
  return "data type " + std::to_string(t) + " (unknown to Ember)";
}

ScalarType map_onnx_dtype(int32_t t, const std::string& what) {
  switch (static_cast<OnnxDataType>(t)) {
    case OnnxDataType::Float: return ScalarType::F32;
    case OnnxDataType::Float16: return ScalarType::F16;
    case OnnxDataType::Bfloat16: return ScalarType::BF16;
    case OnnxDataType::Int8: return ScalarType::I8;
    case OnnxDataType::Uint8: return ScalarType::U8;
    case OnnxDataType::Int16: return ScalarType::I16;
    case OnnxDataType::Int32: return ScalarType::I32;
    case OnnxDataType::Int64: return ScalarType::I64;
    case OnnxDataType::Bool: return ScalarType::Bool;
    case OnnxDataType::Double: return ScalarType::F64;
    case OnnxDataType::Float8E4M3FN:
    case OnnxDataType::Float8E5M2:
      throw ExportError(what + ": ONNX data type " + onnx_dtype_name(t) +
                        " is not supported yet (FP8 ONNX tensors; Ember's FP8 weights come from its own quantization)");
    case OnnxDataType::Undefined:
      throw ExportError(what + ": ONNX data type UNDEFINED (0): the file does not say the element type");
    default:
      break;
  }
  const std::string name = onnx_dtype_name(t);
  throw ExportError(what + ": ONNX data type " + name + (name.rfind("data type", 0) == 0 ? "" : " (" + std::to_string(t) + ")") +
                    " is not supported");
}

HostTensor read_tensor_proto(const onnx::TensorProto& tensor, const TensorReadOptions& options,
                             const std::string& what) {
  const int32_t onnx_type = tensor.data_type();
  const ScalarType dtype = map_onnx_dtype(onnx_type, what);
  if (tensor.has_segment()) throw ExportError(what + ": segmented tensors are not supported");
  HostTensor out;
  out.dtype = (dtype == ScalarType::F64 && options.convert_double) ? ScalarType::F32 : dtype;
  if (tensor.dims_size() > 8) throw ExportError(what + ": rank " + std::to_string(tensor.dims_size()) + " > 8");
  uint64_t numel = 1;
  bool too_many = false, empty = false;
  for (int64_t d : tensor.dims()) {
    if (d < 0) throw ExportError(what + ": negative dim " + std::to_string(d));
    empty = empty || d == 0;
    too_many = too_many || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) || numel > (uint64_t{1} << 40);
    out.dims.push_back(d);
  }
  if (too_many && !empty) {
    std::string dims;
    for (int64_t d : tensor.dims()) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    throw ExportError(what + ": dims [" + dims + "] make more than 2^40 elements");
  }
  if (empty) numel = 0;
  const size_t esize = onnx_elem_size(onnx_type);
  const uint64_t onnx_bytes = numel * esize;
  const bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  std::vector<uint8_t> raw;
  bool have_raw = false;
  if (external) {
    raw = read_external(tensor, options, what, onnx_bytes);
    have_raw = true;
  } else if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != onnx_bytes) {
      throw ExportError(what + ": raw_data holds " + std::to_string(tensor.raw_data().size()) + " bytes, " +
                        onnx_dtype_name(onnx_type) + " x " + std::to_string(numel) + " needs " + std::to_string(onnx_bytes));
    }
    raw.assign(tensor.raw_data().begin(), tensor.raw_data().end());
    have_raw = true;
  }
  auto check_count = [&](size_t count, const char* field) {
    if (count != numel) {
      throw ExportError(what + ": " + field + " holds " + std::to_string(count) + " values, the dims need " +
                        std::to_string(numel));
    }
  };
  if (!have_raw) {
    // The typed field must hold numel values: checked before numel elements are allocated, so dims
    // that claim 2^40 elements over a short field fail here instead of in the allocator.
    switch (dtype) {
      case ScalarType::F32: check_count(static_cast<size_t>(tensor.float_data_size()), "float_data"); break;
      case ScalarType::F64: check_count(static_cast<size_t>(tensor.double_data_size()), "double_data"); break;
      case ScalarType::I64: check_count(static_cast<size_t>(tensor.int64_data_size()), "int64_data"); break;
      case ScalarType::I32: case ScalarType::F16: case ScalarType::BF16: case ScalarType::I16:
      case ScalarType::I8: case ScalarType::U8: case ScalarType::Bool:
        check_count(static_cast<size_t>(tensor.int32_data_size()), "int32_data");
        break;
      default: throw ExportError(what + ": cannot decode " + onnx_dtype_name(onnx_type));
    }
  }
  out.bytes.resize(nbytes_of(out.dtype, numel));
  if (dtype == ScalarType::F64 && options.convert_double) {
    for (uint64_t i = 0; i < numel; ++i) {
      double v = 0;
      if (have_raw) {
        std::memcpy(&v, raw.data() + i * 8, 8);
      } else {
        check_count(static_cast<size_t>(tensor.double_data_size()), "double_data");
        v = tensor.double_data(static_cast<int>(i));
      }
      put<float>(out.bytes, i, static_cast<float>(v));
    }
    return out;
  }
  if (have_raw) {
    if (!raw.empty()) std::memcpy(out.bytes.data(), raw.data(), out.bytes.size());
    if (dtype == ScalarType::Bool) {
      for (uint8_t& b : out.bytes) b = b != 0;
    }
    return out;
  }
  switch (dtype) {
    case ScalarType::F32:
      check_count(static_cast<size_t>(tensor.float_data_size()), "float_data");
      for (uint64_t i = 0; i < numel; ++i) put<float>(out.bytes, i, tensor.float_data(static_cast<int>(i)));
      break;
    case ScalarType::F64:
      check_count(static_cast<size_t>(tensor.double_data_size()), "double_data");
      for (uint64_t i = 0; i < numel; ++i) put<double>(out.bytes, i, tensor.double_data(static_cast<int>(i)));
      break;
    case ScalarType::I64:
      check_count(static_cast<size_t>(tensor.int64_data_size()), "int64_data");
      for (uint64_t i = 0; i < numel; ++i) put<int64_t>(out.bytes, i, tensor.int64_data(static_cast<int>(i)));
      break;
    case ScalarType::I32:
      check_count(static_cast<size_t>(tensor.int32_data_size()), "int32_data");
      for (uint64_t i = 0; i < numel; ++i) put<int32_t>(out.bytes, i, tensor.int32_data(static_cast<int>(i)));
      break;
    case ScalarType::F16: case ScalarType::BF16: case ScalarType::I16:
      check_count(static_cast<size_t>(tensor.int32_data_size()), "int32_data");
      for (uint64_t i = 0; i < numel; ++i) {
        put<uint16_t>(out.bytes, i, static_cast<uint16_t>(tensor.int32_data(static_cast<int>(i))));
      }
      break;
    case ScalarType::I8: case ScalarType::U8: case ScalarType::Bool:
      check_count(static_cast<size_t>(tensor.int32_data_size()), "int32_data");
      for (uint64_t i = 0; i < numel; ++i) {
        const int32_t v = tensor.int32_data(static_cast<int>(i));
        out.bytes[i] = dtype == ScalarType::Bool ? static_cast<uint8_t>(v != 0) : static_cast<uint8_t>(v);
      }
      break;
    default:
      throw ExportError(what + ": cannot decode " + onnx_dtype_name(onnx_type));
  }
  return out;
}

}  // namespace ember::exporter
