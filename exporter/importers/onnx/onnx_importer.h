// ONNX importer: an .onnx file (from either torch.onnx.export path; default-domain opsets 11..21,
// model-local functions inlined) to an exporter Graph with shapes and symbols inferred.
//
//   OnnxImportOptions options;
//   options.input_shapes = parse_input_shapes({"input=batch:1..8x3x224x224"});
//   OnnxImport imported = import_onnx_file("model.onnx", options);
//   ExportResult result = export_graph(std::move(imported.graph), export_options);
//
// What happens at import (exporter/README.md "ONNX" has the op table):
// - initializers, Constant nodes and int64 "shape values" (Shape/Gather/Unsqueeze/Concat/Slice/...
//   chains) are evaluated at export; shape values hold constants or symbolic ints (sym_int.h), so
//   `x.view(x.size(0), -1)` becomes reshape [batch, -1] instead of baking in a batch size;
// - nodes whose inputs are all constant are folded with the reference kernels;
// - Identity/Dropout are removed; BatchNormalization after Conv/Gemm/MatMul with one reader is
//   folded into the weights (passes/batch_norm_folding.h), else it becomes a batch_norm op;
// - anything unsupported throws ExportError "onnx: <OpType> node '<name>' (opset N): <reason>",
//   naming the attribute or dtype.
// Host-only. Not thread-safe (one import at a time per object; the functions are reentrant).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exporter/importers/onnx/input_shape.h"
#include "exporter/ir/graph.h"

namespace onnx {
class ModelProto;
}

namespace ember::exporter {

struct OnnxImportOptions {
  // Overrides / completes graph input shapes. Every symbolic (dim_param) or unknown input dim needs
  // one: the planner sizes memory for each symbol's max.
  std::vector<InputShapeSpec> input_shapes;
  // External data files may resolve outside the model's folder (symlinks, "..", absolute paths);
  // by default they must stay inside it (exporter --trust-model-folder).
  bool trust_model_folder = false;
  // An initializer holding NaN or ±Inf fails the import naming it (passes/weight_check.h), unless
  // this is set (exporter --allow-non-finite-weights; the pipeline then warns about the constants).
  bool allow_non_finite_weights = false;
  // Graph inputs fixed at export (exporter --input-value NAME=V[,V...]): each becomes a constant of
  // the input's dtype (a scalar for one value when the model declares rank 0 or gives no shape, else
  // the model's static dims, whose element count must match) and is not an input of the program.
  // An If whose condition depends only on such values is then taken at export (silero-vad's `sr`).
  struct InputValue {
    std::string name;
    std::vector<double> values;
    std::string text;  // as given, for messages
  };
  std::vector<InputValue> input_values;
};

// "NAME=V[,V...]" (decimal numbers) -> InputValue; ExportError naming the text when malformed.
OnnxImportOptions::InputValue parse_input_value(const std::string& text);

struct OnnxImportStats {
  int64_t ir_version = 0;
  int64_t opset = 0;               // default domain
  std::string producer;            // "pytorch 1.13.1"
  size_t onnx_nodes = 0;           // after inlining functions
  std::map<std::string, int> onnx_ops;  // op_type histogram
  int removed_identity = 0;        // Identity / Dropout
  int folded_batch_norms = 0;
  int evaluated_at_export = 0;     // nodes computed at export (constants and shape values)
  int inlined_functions = 0;
  int folded_ifs = 0;              // If nodes replaced by the branch their known condition takes
  int selected_ifs = 0;            // If nodes on a run-time condition: both branches + where
  int bound_inputs = 0;            // --input-value
  uint64_t initializer_bytes = 0;
  int external_tensors = 0;
  double seconds = 0;
};

struct OnnxImport {
  Graph graph;
  OnnxImportStats stats;
};

// Reads `path` (external data relative to its folder). A regular file only (a FIFO or device is
// refused without blocking). Files over protobuf's 2 GiB message limit are rejected with a hint to
// save weights as external data. External data must resolve inside the folder (symlinks followed)
// unless options.trust_model_folder.
OnnxImport import_onnx_file(const std::string& path, const OnnxImportOptions& options = {});
// A serialized ModelProto; external data relative to `base_dir`; `source` names the bytes in errors
// (import_onnx_file passes the path). Parsing limits and the refusals of empty, non-ONNX or
// graph-less input: model_proto.h.
OnnxImport import_onnx_bytes(const std::string& bytes, const std::string& base_dir,
                             const OnnxImportOptions& options = {}, const std::string& source = "model bytes");
OnnxImport import_onnx_model(const onnx::ModelProto& model, const std::string& base_dir,
                             const OnnxImportOptions& options = {});

// "onnx: opset 13, ir 8, producer pytorch 1.13.1; 65 nodes {Add x8, Conv x20, ...}; ..." (lines).
std::string format_import_summary(const OnnxImportStats& stats);

}  // namespace ember::exporter
