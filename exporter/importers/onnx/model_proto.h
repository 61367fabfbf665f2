// Parsing a serialized ONNX ModelProto from untrusted bytes, with explicit limits, and saying what is
// wrong when it is not one. Host-only; throws ExportError "onnx: <source>: ...".
//
// Limits: the size is below protobuf's 2 GiB hard cap (kMaxOnnxModelBytes); messages nest at most
// kMaxOnnxMessageDepth levels (protobuf's default recursion limit, set explicitly): the model's graph
// is level 1 and a graph inside an If/Loop/Scan attribute costs three more (graph -> node ->
// attribute -> graph), so about 33 nested graphs fit; TypeProto sequences/maps/optionals count too.
// Refusals, each one line:
//   "onnx: <source>: empty file, not an ONNX model"
//   "onnx: <source>: not an ONNX ModelProto (parse failed at byte N, in graph.node[3].attribute[0]:
//    length 4000 runs past the end of its message (12 bytes left))"
//   "onnx: <source>: not an ONNX ModelProto (parse failed at byte N, in graph.node[0]...: messages
//    nest deeper than 100 levels; ...)"
//   "onnx: <source>: not an ONNX model: the ModelProto has no graph (ir_version 0, 0 opset imports)"
//   "onnx: <source>: N bytes; protobuf messages are limited to 2 GiB: save the weights as external data ..."
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace onnx {
class ModelProto;
}

namespace ember::exporter {

constexpr int kMaxOnnxMessageDepth = 100;
constexpr uint64_t kMaxOnnxModelBytes = (uint64_t{1} << 31) - 1;  // protobuf reads at most INT_MAX bytes

// Parses `bytes` into `model` (cleared first) or throws ExportError naming `source` (a path, or a
// description of where the bytes came from).
void parse_onnx_model(const std::string& bytes, const std::string& source, onnx::ModelProto* model);

// Walks the protobuf wire format of `bytes` as a ModelProto (field numbers of onnx.proto for the
// messages that hold structure; others are checked for tag, varint and length framing only) and
// describes the first problem: "at byte N, in graph.node[3]: <what>". Empty when it finds none.
// Exposed for tests; parse_onnx_model uses it to explain a protobuf parse failure.
std::string describe_onnx_wire_error(const uint8_t* bytes, size_t size, int max_depth = kMaxOnnxMessageDepth);

}  // namespace ember::exporter
