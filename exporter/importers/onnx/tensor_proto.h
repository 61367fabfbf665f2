// ONNX TensorProto -> dense host tensor: every data type ONNX defines is either mapped to an Ember
// dtype or rejected by name (or by number when even the name is unknown), never read as undefined.
// Data comes from raw_data, the typed fields or external data files (relative to the model's folder,
// bounds-checked). Host-only; throws ExportError.
#pragma once

#include <cstdint>
#include <string>

#include "exporter/passes/evaluate.h"

namespace onnx {
class TensorProto;
}

namespace ember::exporter {

// ONNX TensorProto.DataType numbers, including those newer than the onnx.proto Ember compiles
// (Debian's 1.12 knows up to BFLOAT16 = 16).
enum class OnnxDataType : int32_t {
  Undefined = 0, Float = 1, Uint8 = 2, Int8 = 3, Uint16 = 4, Int16 = 5, Int32 = 6, Int64 = 7,
  String = 8, Bool = 9, Float16 = 10, Double = 11, Uint32 = 12, Uint64 = 13, Complex64 = 14,
  Complex128 = 15, Bfloat16 = 16, Float8E4M3FN = 17, Float8E4M3FNUZ = 18, Float8E5M2 = 19,
  Float8E5M2FNUZ = 20, Uint4 = 21, Int4 = 22, Float4E2M1 = 23, Float8E8M0 = 24, Uint2 = 25, Int2 = 26,
};

// "FLOAT", "FLOAT8E4M3FN", ...; "data type 99 (unknown to Ember)" for numbers no ONNX version Ember
// knows defines.
std::string onnx_dtype_name(int32_t data_type);

// The Ember dtype for an ONNX data type, or throws ExportError "<what>: ONNX data type NAME is not
// supported (...)". DOUBLE maps to F64 here; callers convert constants to f32 (convert_double=true in
// read_tensor_proto) and reject f64 run-time tensors.
ScalarType map_onnx_dtype(int32_t data_type, const std::string& what);

struct TensorReadOptions {
  std::string base_dir;       // external data locations are relative to this folder
  bool trust_model_folder = false;  // external data may resolve outside base_dir (symlinks, "..", absolute)
  bool convert_double = true;  // DOUBLE constants become f32
};

// Decodes a TensorProto (an initializer, a Constant's value, ...). `what` names it in messages.
HostTensor read_tensor_proto(const onnx::TensorProto& tensor, const TensorReadOptions& options,
                             const std::string& what);

}  // namespace ember::exporter
