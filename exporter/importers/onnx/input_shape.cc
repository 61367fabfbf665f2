#include "exporter/importers/onnx/input_shape.h"

#include <algorithm>
#include <cctype>

#include "exporter/ir/graph.h"

namespace ember::exporter {
namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

[[noreturn]] void fail(const std::string& text, const std::string& why) {
  throw ExportError("--input-shape '" + text + "': " + why +
                    " (expected NAME=DIMS, DIMS joined by 'x', each a size, SYM:MIN..MAX, SYM:MAX or SYM; "
                    "e.g. input=batch:1..8x3x224x224)");
}

// Reads a non-negative decimal at s[*pos].
bool read_number(const std::string& s, size_t* pos, int64_t* out) {
  size_t p = *pos;
  if (p >= s.size() || !std::isdigit(static_cast<unsigned char>(s[p]))) return false;
  int64_t v = 0;
  while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) {
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[p] - '0', &v)) return false;
    ++p;
  }
  *pos = p;
  *out = v;
  return true;
}

}  // namespace

InputShapeSpec parse_input_shape(const std::string& text, const std::vector<std::string>& known_symbols) {
  InputShapeSpec spec;
  spec.text = text;
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) fail(text, "no input name before '='");
  spec.name = text.substr(0, eq);
  const std::string dims = text.substr(eq + 1);
  std::vector<std::string> symbols = known_symbols;
  if (dims.empty()) return spec;  // a 0-d (scalar) input
  size_t p = 0;
  while (true) {
    InputDimSpec d;
    if (std::isdigit(static_cast<unsigned char>(dims[p]))) {
      if (!read_number(dims, &p, &d.size)) fail(text, "bad size at '" + dims.substr(p) + "'");
    } else if (is_ident_start(dims[p])) {
      // SYM:... reads the name up to ':'; a bare SYM must be a known name followed by 'x' or the end.
      size_t colon = p;
      while (colon < dims.size() && is_ident_char(dims[colon])) ++colon;
      if (colon < dims.size() && dims[colon] == ':') {
        d.symbol = dims.substr(p, colon - p);
        p = colon + 1;
        int64_t a = 0, b = 0;
        if (!read_number(dims, &p, &a)) fail(text, "symbol '" + d.symbol + "' needs MIN..MAX or MAX after ':'");
        if (p + 1 < dims.size() && dims[p] == '.' && dims[p + 1] == '.') {
          p += 2;
          if (!read_number(dims, &p, &b)) fail(text, "symbol '" + d.symbol + "': no MAX after '..'");
          d.min = a;
          d.max = b;
        } else {
          d.min = 1;
          d.max = a;
        }
        if (d.min > d.max) {
          fail(text, "symbol '" + d.symbol + "' has min " + std::to_string(d.min) + " > max " + std::to_string(d.max));
        }
        if (d.max == 0) fail(text, "symbol '" + d.symbol + "' has max 0");
        symbols.push_back(d.symbol);
      } else {
        size_t best = 0;
        for (const std::string& name : symbols) {
          if (name.size() > best && dims.compare(p, name.size(), name) == 0 &&
              (p + name.size() == dims.size() || dims[p + name.size()] == 'x')) {
            best = name.size();
            d.symbol = name;
          }
        }
        if (best == 0) {
          fail(text, "'" + dims.substr(p) + "' does not start with a size or a bounded symbol "
                     "(write SYM:MIN..MAX the first time a symbol appears)");
        }
        p += best;
      }
    } else {
      fail(text, "unexpected '" + dims.substr(p) + "'");
    }
    spec.dims.push_back(d);
    if (p == dims.size()) break;
    if (dims[p] != 'x' || p + 1 == dims.size()) fail(text, "expected 'x' and a dim at '" + dims.substr(p) + "'");
    ++p;
  }
  if (spec.dims.size() > 8) fail(text, "rank " + std::to_string(spec.dims.size()) + " > 8");
  return spec;
}

std::vector<InputShapeSpec> parse_input_shapes(const std::vector<std::string>& texts) {
  std::vector<InputShapeSpec> out;
  std::vector<std::string> symbols;
  for (const std::string& t : texts) {
    out.push_back(parse_input_shape(t, symbols));
    for (const InputDimSpec& d : out.back().dims) {
      if (d.size < 0 && std::find(symbols.begin(), symbols.end(), d.symbol) == symbols.end()) symbols.push_back(d.symbol);
    }
    for (size_t i = 0; i + 1 < out.size(); ++i) {
      if (out[i].name == out.back().name) throw ExportError("--input-shape given twice for input '" + out[i].name + "'");
    }
  }
  return out;
}

}  // namespace ember::exporter
