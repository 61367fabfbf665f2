#include "exporter/importers/onnx/sym_int.h"

#include <algorithm>
#include <limits>

namespace ember::exporter {
namespace {

bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

SymInt normalized(SymInt s) {
  if (s.opaque) return SymInt::unknown();
  if (s.c == 0) s.terms.clear();
  return s;
}

}  // namespace

SymInt sym_add(const SymInt& a, const SymInt& b) {
  if (a.opaque || b.opaque) return SymInt::unknown();
  if (a.is_constant() && b.is_constant()) {
    int64_t r = 0;
    if (__builtin_add_overflow(a.c, b.c, &r)) return SymInt::unknown();
    return SymInt::constant(r);
  }
  if (a.is_constant() && a.c == 0) return b;
  if (b.is_constant() && b.c == 0) return a;
  if (a.terms == b.terms) {  // same monomial: coefficients add
    SymInt r = a;
    if (__builtin_add_overflow(a.c, b.c, &r.c)) return SymInt::unknown();
    return normalized(r);
  }
  return SymInt::unknown();
}

SymInt sym_neg(const SymInt& a) {
  if (a.opaque || a.c == std::numeric_limits<int64_t>::min()) return SymInt::unknown();
  SymInt r = a;
  r.c = -a.c;
  return r;
}

SymInt sym_sub(const SymInt& a, const SymInt& b) { return sym_add(a, sym_neg(b)); }

SymInt sym_mul(const SymInt& a, const SymInt& b) {
  if (a.opaque || b.opaque) {
    // 0 * anything is 0 even when the other side is unknown.
    if ((a.is_constant() && a.c == 0) || (b.is_constant() && b.c == 0)) return SymInt::constant(0);
    return SymInt::unknown();
  }
  SymInt r;
  if (mul_overflows(a.c, b.c, &r.c)) return SymInt::unknown();
  r.terms = a.terms;
  for (const auto& term : b.terms) {  // no structured binding: clang 14 cannot capture one
    const auto& sym = term.first;
    const auto power = term.second;
    auto it = std::find_if(r.terms.begin(), r.terms.end(), [&](const auto& t) { return t.first == sym; });
    if (it != r.terms.end()) {
      it->second += power;
    } else {
      r.terms.emplace_back(sym, power);
    }
  }
  std::sort(r.terms.begin(), r.terms.end());
  return normalized(r);
}

SymInt sym_div(const SymInt& a, const SymInt& b) {
  if (a.opaque || b.opaque) return SymInt::unknown();
  if (b.is_constant()) {
    if (b.c == 0) return SymInt::unknown();
    if (a.is_constant()) {
      if (a.c == std::numeric_limits<int64_t>::min() && b.c == -1) return SymInt::unknown();
      return SymInt::constant(a.c / b.c);
    }
    if (a.c % b.c != 0) return SymInt::unknown();
    SymInt r = a;
    r.c = a.c / b.c;
    return normalized(r);
  }
  // Monomial / monomial: exact when b's terms divide a's and the coefficients divide.
  if (b.c == 0 || a.c % b.c != 0) return SymInt::unknown();
  SymInt r = a;
  r.c = a.c / b.c;
  for (const auto& term : b.terms) {
    const auto& sym = term.first;
    const auto power = term.second;
    auto it = std::find_if(r.terms.begin(), r.terms.end(), [&](const auto& t) { return t.first == sym; });
    if (it == r.terms.end() || it->second < power) return SymInt::unknown();
    it->second -= power;
    if (it->second == 0) r.terms.erase(it);
  }
  return normalized(r);
}

bool sym_bounds(const SymInt& a, const Graph& graph, int64_t* lo, int64_t* hi) {
  if (a.opaque) return false;
  if (a.is_constant()) {
    *lo = *hi = a.c;
    return true;
  }
  if (a.c < 0) return false;
  int64_t l = a.c, h = a.c;
  for (const auto& [sym, power] : a.terms) {
    if (sym == 0 || sym > graph.symbols.size()) return false;
    const Symbol& s = graph.symbols[sym - 1u];
    for (int p = 0; p < power; ++p) {
      if (mul_overflows(l, s.min, &l) || mul_overflows(h, s.max, &h)) return false;
    }
  }
  *lo = l;
  *hi = h;
  return true;
}

int sym_equal(const SymInt& a, const SymInt& b, const Graph& graph) {
  if (a.same_as(b)) return 1;
  int64_t alo, ahi, blo, bhi;
  if (!sym_bounds(a, graph, &alo, &ahi) || !sym_bounds(b, graph, &blo, &bhi)) return -1;
  if (a.is_constant() && b.is_constant()) return a.c == b.c ? 1 : 0;
  if (ahi < blo || bhi < alo) return 0;
  return -1;
}

int sym_less(const SymInt& a, const SymInt& b, const Graph& graph) {
  int64_t alo, ahi, blo, bhi;
  if (a.same_as(b)) return 0;
  if (!sym_bounds(a, graph, &alo, &ahi) || !sym_bounds(b, graph, &blo, &bhi)) return -1;
  if (ahi < blo) return 1;
  if (alo >= bhi) return 0;
  return -1;
}

SymInt sym_min(const SymInt& a, const SymInt& b, const Graph& graph) {
  const int less = sym_less(a, b, graph);
  if (less == 1 || a.same_as(b)) return a;
  if (less == 0) {
    // a >= b always.
    return b;
  }
  return SymInt::unknown();
}

SymInt sym_max(const SymInt& a, const SymInt& b, const Graph& graph) {
  const int less = sym_less(a, b, graph);
  if (less == 1) return b;
  if (less == 0 || a.same_as(b)) return a;
  return SymInt::unknown();
}

std::string format_sym(const SymInt& a, const Graph& graph) {
  if (a.opaque) return "?";
  if (a.terms.empty()) return std::to_string(a.c);
  // Appends only (GCC 12 warns falsely on `"literal" + std::string` here).
  std::string s;
  if (a.c != 1) s.append(std::to_string(a.c)).append("*");
  for (size_t i = 0; i < a.terms.size(); ++i) {
    if (i) s.append("*");
    const uint16_t sym = a.terms[i].first;
    if (sym <= graph.symbols.size()) {
      s.append(graph.symbols[sym - 1u].name);
    } else {
      s.append("s").append(std::to_string(sym));
    }
    if (a.terms[i].second != 1) s.append("^").append(std::to_string(a.terms[i].second));
  }
  return s;
}

}  // namespace ember::exporter
