// SymInt: the tiny symbolic-integer evaluator behind the ONNX importer's export-time "shape values"
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains). An element is a constant, a monomial
// c * s1^p1 * s2^p2 ... over graph symbols (`batch`, `batch * seq`, `4 * seq`), or opaque: a run-time
// value the evaluator cannot name (a sum of two different monomials, a non-exact division). Opaque
// elements may still become the one inferred (-1) dim of a reshape; anything else that needs them fails.
// Symbol values are >= 0 (their bounds come from the Graph). Host-only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exporter/ir/graph.h"

namespace ember::exporter {

struct SymInt {
  int64_t c = 0;                               // the value when `terms` is empty, else the coefficient
  std::vector<std::pair<uint16_t, int>> terms;  // (1-based symbol id, exponent >= 1), sorted by id
  bool opaque = false;

  static SymInt constant(int64_t v) { return SymInt{v, {}, false}; }
  static SymInt symbol(uint16_t sym) { return SymInt{1, {{sym, 1}}, false}; }
  static SymInt unknown() { return SymInt{0, {}, true}; }

  bool is_constant() const { return !opaque && terms.empty(); }
  // Exactly one symbol to the first power with coefficient 1: representable as a Dim{max, sym}.
  bool is_symbol() const { return !opaque && c == 1 && terms.size() == 1 && terms[0].second == 1; }
  uint16_t symbol_id() const { return terms.empty() ? 0 : terms[0].first; }
  bool same_as(const SymInt& o) const { return !opaque && !o.opaque && c == o.c && terms == o.terms; }
};

SymInt sym_add(const SymInt& a, const SymInt& b);
SymInt sym_sub(const SymInt& a, const SymInt& b);
SymInt sym_mul(const SymInt& a, const SymInt& b);
// Integer division truncating toward zero (ONNX Div on integers); exact monomial divisions stay
// symbolic (`4*seq / 4 = seq`, `batch*seq / seq = batch`), others become opaque.
SymInt sym_div(const SymInt& a, const SymInt& b);
SymInt sym_neg(const SymInt& a);
SymInt sym_min(const SymInt& a, const SymInt& b, const Graph& graph);
SymInt sym_max(const SymInt& a, const SymInt& b, const Graph& graph);

// Smallest and largest value over the symbols' bounds; false for opaque or negative coefficients
// with symbols (not needed by any pattern).
bool sym_bounds(const SymInt& a, const Graph& graph, int64_t* lo, int64_t* hi);
// 1 = always equal, 0 = never equal, -1 = depends on the symbols' run-time values.
int sym_equal(const SymInt& a, const SymInt& b, const Graph& graph);
// 1 = a < b always, 0 = never, -1 = depends.
int sym_less(const SymInt& a, const SymInt& b, const Graph& graph);

// "3", "batch", "4*batch*seq^2", "?" (opaque).
std::string format_sym(const SymInt& a, const Graph& graph);

}  // namespace ember::exporter
