// `--input-shape NAME=SPEC`: the shape of one graph input, overriding (or completing) the one in the
// ONNX file. SPEC is dims joined by 'x':
//   224            a static size
//   batch:1..8     a symbol with bounds [min, max]
//   batch:8        a symbol with bounds [1, 8]
//   batch          a symbol whose bounds another spec (or an earlier dim) gives
// e.g. "input=batch:1..8x3x224x224", "ids=batch:1..4xseq:1..128", "mask=batchxseq", "x=1x3x224x224".
// A bare symbol name is matched against the symbols named so far (the longest that is followed by
// 'x' or the end), so names may contain 'x'. Host-only; throws ExportError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::exporter {

struct InputDimSpec {
  int64_t size = -1;    // static size (>= 0), or -1 for a symbol
  std::string symbol;   // symbol name when size == -1
  int64_t min = -1;     // bounds when written with the symbol; -1 = not given here
  int64_t max = -1;
};

struct InputShapeSpec {
  std::string name;
  std::vector<InputDimSpec> dims;
  std::string text;  // as written, for messages
};

// Parses "NAME=SPEC". `known_symbols` are names that a bare symbol may refer to (symbols named with
// bounds in this spec are added as parsing goes).
InputShapeSpec parse_input_shape(const std::string& text, const std::vector<std::string>& known_symbols = {});

// Parses every spec in order, so a later spec may name a symbol an earlier one bounded.
std::vector<InputShapeSpec> parse_input_shapes(const std::vector<std::string>& texts);

}  // namespace ember::exporter
