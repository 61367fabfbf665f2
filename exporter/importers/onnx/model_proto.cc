#include "exporter/importers/onnx/model_proto.h"

#include <climits>
#include <map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "exporter/ir/graph.h"
#include "onnx.pb.h"

namespace ember::exporter {
namespace {

// ---- onnx.proto's field numbers (the messages that hold structure) -----------------------------
// onnx.proto is compiled with optimize_for = LITE_RUNTIME: no descriptors to ask, hence the table.

enum Msg : int8_t {
  kNone = -1,  // not a message (bytes, or a number)
  kOpaque,     // a message whose fields are framing-checked only (OperatorSetId, StringStringEntry, ...)
  kModel, kGraph, kNode, kAttribute, kFunction, kTraining, kTensor, kSparseTensor, kValueInfo,
  kType, kTypeTensor, kTypeElem, kTypeMap, kShape, kDim,
};
enum Kind : uint8_t { kBytes, kMessage, kVarint, kFixed32, kFixed64 };

struct Field {
  int number;
  const char* name;
  Kind kind;
  Msg message;    // for kMessage
  bool repeated;  // named with an index; numbers of a repeated field may come packed
};

struct MessageInfo {
  Msg msg;
  const Field* fields;
  size_t count;
};

constexpr Field kModelFields[] = {
    {1, "ir_version", kVarint, kNone, false},       {2, "producer_name", kBytes, kNone, false},
    {3, "producer_version", kBytes, kNone, false},  {4, "domain", kBytes, kNone, false},
    {5, "model_version", kVarint, kNone, false},    {6, "doc_string", kBytes, kNone, false},
    {7, "graph", kMessage, kGraph, false},          {8, "opset_import", kMessage, kOpaque, true},
    {14, "metadata_props", kMessage, kOpaque, true}, {20, "training_info", kMessage, kTraining, true},
    {25, "functions", kMessage, kFunction, true},
};
constexpr Field kGraphFields[] = {
    {1, "node", kMessage, kNode, true},           {2, "name", kBytes, kNone, false},
    {5, "initializer", kMessage, kTensor, true},  {15, "sparse_initializer", kMessage, kSparseTensor, true},
    {10, "doc_string", kBytes, kNone, false},     {11, "input", kMessage, kValueInfo, true},
    {12, "output", kMessage, kValueInfo, true},   {13, "value_info", kMessage, kValueInfo, true},
    {14, "quantization_annotation", kMessage, kOpaque, true},
};
constexpr Field kNodeFields[] = {
    {1, "input", kBytes, kNone, true},  {2, "output", kBytes, kNone, true},  {3, "name", kBytes, kNone, false},
    {4, "op_type", kBytes, kNone, false}, {7, "domain", kBytes, kNone, false},
    {5, "attribute", kMessage, kAttribute, true}, {6, "doc_string", kBytes, kNone, false},
};
constexpr Field kAttributeFields[] = {
    {1, "name", kBytes, kNone, false},       {21, "ref_attr_name", kBytes, kNone, false},
    {13, "doc_string", kBytes, kNone, false}, {20, "type", kVarint, kNone, false},
    {2, "f", kFixed32, kNone, false},        {3, "i", kVarint, kNone, false},
    {4, "s", kBytes, kNone, false},          {5, "t", kMessage, kTensor, false},
    {6, "g", kMessage, kGraph, false},       {22, "sparse_tensor", kMessage, kSparseTensor, false},
    {14, "tp", kMessage, kType, false},      {7, "floats", kFixed32, kNone, true},
    {8, "ints", kVarint, kNone, true},       {9, "strings", kBytes, kNone, true},
    {10, "tensors", kMessage, kTensor, true}, {11, "graphs", kMessage, kGraph, true},
    {23, "sparse_tensors", kMessage, kSparseTensor, true}, {15, "type_protos", kMessage, kType, true},
};
constexpr Field kFunctionFields[] = {
    {1, "name", kBytes, kNone, false},  {4, "input", kBytes, kNone, true},  {5, "output", kBytes, kNone, true},
    {6, "attribute", kBytes, kNone, true}, {7, "node", kMessage, kNode, true},
    {8, "doc_string", kBytes, kNone, false}, {9, "opset_import", kMessage, kOpaque, true},
    {10, "domain", kBytes, kNone, false},
};
constexpr Field kTrainingFields[] = {
    {1, "initialization", kMessage, kGraph, false}, {2, "algorithm", kMessage, kGraph, false},
    {3, "initialization_binding", kMessage, kOpaque, true}, {4, "update_binding", kMessage, kOpaque, true},
};
constexpr Field kTensorFields[] = {
    {1, "dims", kVarint, kNone, true},         {2, "data_type", kVarint, kNone, false},
    {3, "segment", kMessage, kOpaque, false},  {4, "float_data", kFixed32, kNone, true},
    {5, "int32_data", kVarint, kNone, true},   {6, "string_data", kBytes, kNone, true},
    {7, "int64_data", kVarint, kNone, true},   {8, "name", kBytes, kNone, false},
    {12, "doc_string", kBytes, kNone, false},  {9, "raw_data", kBytes, kNone, false},
    {13, "external_data", kMessage, kOpaque, true}, {14, "data_location", kVarint, kNone, false},
    {10, "double_data", kFixed64, kNone, true}, {11, "uint64_data", kVarint, kNone, true},
};
constexpr Field kSparseTensorFields[] = {
    {1, "values", kMessage, kTensor, false}, {2, "indices", kMessage, kTensor, false}, {3, "dims", kVarint, kNone, true},
};
constexpr Field kValueInfoFields[] = {
    {1, "name", kBytes, kNone, false}, {2, "type", kMessage, kType, false}, {3, "doc_string", kBytes, kNone, false},
};
constexpr Field kTypeFields[] = {
    {1, "tensor_type", kMessage, kTypeTensor, false}, {4, "sequence_type", kMessage, kTypeElem, false},
    {5, "map_type", kMessage, kTypeMap, false},       {9, "optional_type", kMessage, kTypeElem, false},
    {8, "sparse_tensor_type", kMessage, kTypeTensor, false}, {6, "denotation", kBytes, kNone, false},
};
constexpr Field kTypeTensorFields[] = {{1, "elem_type", kVarint, kNone, false}, {2, "shape", kMessage, kShape, false}};
constexpr Field kTypeElemFields[] = {{1, "elem_type", kMessage, kType, false}};
constexpr Field kTypeMapFields[] = {{1, "key_type", kVarint, kNone, false}, {2, "value_type", kMessage, kType, false}};
constexpr Field kShapeFields[] = {{1, "dim", kMessage, kDim, true}};
constexpr Field kDimFields[] = {
    {1, "dim_value", kVarint, kNone, false}, {2, "dim_param", kBytes, kNone, false}, {3, "denotation", kBytes, kNone, false},
};

template <size_t N>
constexpr MessageInfo info(Msg msg, const Field (&fields)[N]) {
  return MessageInfo{msg, fields, N};
}
constexpr MessageInfo kMessages[] = {
    {kOpaque, nullptr, 0},
    info(kModel, kModelFields),           info(kGraph, kGraphFields),         info(kNode, kNodeFields),
    info(kAttribute, kAttributeFields),   info(kFunction, kFunctionFields),   info(kTraining, kTrainingFields),
    info(kTensor, kTensorFields),         info(kSparseTensor, kSparseTensorFields),
    info(kValueInfo, kValueInfoFields),   info(kType, kTypeFields),           info(kTypeTensor, kTypeTensorFields),
    info(kTypeElem, kTypeElemFields),     info(kTypeMap, kTypeMapFields),     info(kShape, kShapeFields),
    info(kDim, kDimFields),
};

static_assert(sizeof(kMessages) / sizeof(kMessages[0]) == kDim + 1, "kMessages is indexed by Msg");

const Field* find_field(Msg msg, uint64_t number) {
  if (msg < 0) return nullptr;
  const MessageInfo& m = kMessages[msg];
  for (size_t i = 0; i < m.count; ++i) {
    if (static_cast<uint64_t>(m.fields[i].number) == number) return &m.fields[i];
  }
  return nullptr;
}

// ---- The walk ----------------------------------------------------------------------------------

struct Walker {
  Walker(const uint8_t* bytes, int depth_limit) : data(bytes), max_depth(depth_limit) {}
  const uint8_t* data;
  int max_depth;
  size_t error_at = 0;
  std::string error_path, error;

  bool fail(size_t at, const std::string& path, std::string why) {
    error_at = at;
    error_path = path;
    error = std::move(why);
    return false;
  }

  // Reads a varint (at most 10 bytes, as protobuf) at *pos < end.
  bool varint(size_t* pos, size_t end, uint64_t* out) const {
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (*pos >= end) return false;
      const uint8_t b = data[(*pos)++];
      v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }

  bool packed(const Field& f, size_t begin, size_t end, const std::string& path) {
    if (f.kind == kFixed32 || f.kind == kFixed64) {
      const size_t width = f.kind == kFixed32 ? 4 : 8;
      if ((end - begin) % width != 0) {
        return fail(begin, path, "packed " + std::string(f.kind == kFixed32 ? "fixed32" : "fixed64") + " data of " +
                                     std::to_string(end - begin) + " bytes is not a multiple of " + std::to_string(width));
      }
      return true;
    }
    for (size_t pos = begin; pos < end;) {
      const size_t at = pos;
      uint64_t ignored = 0;
      if (!varint(&pos, end, &ignored)) return fail(at, path, "a packed varint is truncated or longer than 10 bytes");
    }
    return true;
  }

  // The fields of one message in [begin, end). `group` > 0: inside a group of that field number,
  // which ends at its end-group tag; *pos receives the position after it.
  bool message(Msg msg, size_t begin, size_t end, int depth, const std::string& path, uint64_t group, size_t* after) {
    std::map<uint64_t, int> seen;  // repeated fields' next index
    size_t pos = begin;
    while (pos < end) {
      const size_t at = pos;
      uint64_t tag = 0;
      if (!varint(&pos, end, &tag)) return fail(at, path, "a field tag is truncated or longer than 10 bytes");
      const uint64_t number = tag >> 3;
      const int wire = static_cast<int>(tag & 7);
      if (number == 0 || number > (uint64_t{1} << 29) - 1) {
        return fail(at, path, "field number " + std::to_string(number) + " is not valid (tag " + std::to_string(tag) + ")");
      }
      const Field* f = find_field(msg, number);
      std::string name = f != nullptr ? f->name : "field " + std::to_string(number);
      if (f != nullptr && f->repeated) name += "[" + std::to_string(seen[number]++) + "]";
      const std::string field_path = path.empty() ? name : path + "." + name;
      switch (wire) {
        case 0: {
          uint64_t ignored = 0;
          if (!varint(&pos, end, &ignored)) return fail(at, field_path, "a varint is truncated or longer than 10 bytes");
          break;
        }
        case 1:
        case 5: {
          const size_t width = wire == 1 ? 8 : 4;
          if (end - pos < width) {
            return fail(at, field_path, "a " + std::to_string(width * 8) + "-bit value runs past the end of its message");
          }
          pos += width;
          break;
        }
        case 2: {
          uint64_t length = 0;
          if (!varint(&pos, end, &length)) return fail(at, field_path, "a length is truncated or longer than 10 bytes");
          if (length > end - pos) {
            return fail(at, field_path, "length " + std::to_string(length) + " runs past the end of its message (" +
                                            std::to_string(end - pos) + " bytes left)");
          }
          const size_t sub_end = pos + static_cast<size_t>(length);
          if (f != nullptr && f->kind == kMessage) {
            if (depth + 1 > max_depth) {
              return fail(at, field_path, "messages nest deeper than " + std::to_string(max_depth) +
                                              " levels (a graph inside an If/Loop/Scan attribute costs 3)");
            }
            size_t ignored = 0;
            if (!message(f->message, pos, sub_end, depth + 1, field_path, 0, &ignored)) return false;
          } else if (f != nullptr && f->repeated && f->kind != kBytes) {
            if (!packed(*f, pos, sub_end, field_path)) return false;
          }
          pos = sub_end;
          break;
        }
        case 3: {
          if (depth + 1 > max_depth) {
            return fail(at, field_path, "groups nest deeper than " + std::to_string(max_depth) + " levels");
          }
          if (!message(kOpaque, pos, end, depth + 1, field_path, number, &pos)) return false;
          break;
        }
        case 4:
          if (group == number) {
            *after = pos;
            return true;
          }
          return fail(at, field_path, "an end-group tag without its start");
        default:
          return fail(at, field_path, "wire type " + std::to_string(wire) + " does not exist");
      }
    }
    if (group != 0) return fail(end, path, "a group (field " + std::to_string(group) + ") has no end-group tag");
    *after = pos;
    return true;
  }
};

}  // namespace

std::string describe_onnx_wire_error(const uint8_t* bytes, size_t size, int max_depth) {
  Walker w(bytes, max_depth);
  size_t ignored = 0;
  if (w.message(kModel, 0, size, 0, "", 0, &ignored)) return "";
  return "at byte " + std::to_string(w.error_at) + (w.error_path.empty() ? "" : ", in " + w.error_path) + ": " + w.error;
}

void parse_onnx_model(const std::string& bytes, const std::string& source, onnx::ModelProto* model) {
  const std::string where = "onnx: " + source + ": ";
  if (bytes.empty()) throw ExportError(where + "empty file, not an ONNX model");
  if (bytes.size() > kMaxOnnxModelBytes) {
    throw ExportError(where + std::to_string(bytes.size()) + " bytes; protobuf messages are limited to 2 GiB: "
                      "save the weights as external data (onnx.save_model(model, path, save_as_external_data=True))");
  }
  model->Clear();
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  coded.SetRecursionLimit(kMaxOnnxMessageDepth);
  if (!model->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    std::string why = describe_onnx_wire_error(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (why.empty()) why = "protobuf rejected it; the wire format's framing looks intact";
    throw ExportError(where + "not an ONNX ModelProto (parse failed " + why + ")");
  }
  if (!model->has_graph()) {
    throw ExportError(where + "not an ONNX model: the ModelProto has no graph (ir_version " +
                      std::to_string(model->ir_version()) + ", " + std::to_string(model->opset_import_size()) +
                      " opset imports)");
  }
}

}  // namespace ember::exporter
