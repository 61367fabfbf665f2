#include "exporter/plan/overlap_check.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "runtime/program/program_file.h"
#include "schema/program_generated.h"

namespace ember::exporter {
namespace {

struct Interval {
  std::string name;     // "forward value 7", "forward delegate 0 value 3"
  uint32_t arena = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint32_t first = 0;
  uint32_t last = 0;
};

std::string range_text(const Interval& i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[%llu, %llu)", static_cast<unsigned long long>(i.offset),
                static_cast<unsigned long long>(i.offset + i.nbytes));
  return buf;
}

const fb::PlannedStorage* planned_of(const fb::Tensor* t) {
  return t == nullptr ? nullptr : t->storage_as_PlannedStorage();
}

void check_method(const fb::Method& method, size_t method_index, std::vector<std::string>& out) {
  const std::string mname = method.name() ? method.name()->str() : "method " + std::to_string(method_index);
  const fb::Graph* graph = method.graph();
  if (graph == nullptr) return;
  const auto* values = graph->values();
  const size_t value_count = values ? values->size() : 0;
  const auto* instructions = graph->instructions();
  const uint32_t instr_count = instructions ? instructions->size() : 0;
  const uint32_t end = instr_count == 0 ? 0 : instr_count - 1;

  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> first(value_count, kNone), last(value_count, 0);
  auto touch = [&](int64_t v, uint32_t at) {
    if (v < 0 || static_cast<size_t>(v) >= value_count) return;
    first[static_cast<size_t>(v)] = std::min(first[static_cast<size_t>(v)], at);
    last[static_cast<size_t>(v)] = std::max(last[static_cast<size_t>(v)], at);
  };
  if (graph->inputs()) {
    for (const auto* nv : *graph->inputs()) touch(nv->value(), 0);
  }
  // delegate index -> calling instructions
  const size_t delegate_count = method.delegates() ? method.delegates()->size() : 0;
  std::vector<std::vector<uint32_t>> calls(delegate_count);
  for (uint32_t i = 0; i < instr_count; ++i) {
    const fb::Instruction* instr = instructions->Get(i);
    if (const auto* k = instr->args_as_KernelCall()) {
      if (k->inputs()) for (int32_t v : *k->inputs()) touch(v, i);
      if (k->outputs()) for (uint32_t v : *k->outputs()) touch(v, i);
    } else if (const auto* d = instr->args_as_DelegateCall()) {
      if (d->inputs()) for (uint32_t v : *d->inputs()) touch(v, i);
      if (d->outputs()) for (uint32_t v : *d->outputs()) touch(v, i);
      if (d->index() < delegate_count) calls[d->index()].push_back(i);
    } else if (const auto* m = instr->args_as_Move()) {
      touch(m->src(), i);
      touch(m->dst(), i);
    } else if (const auto* j = instr->args_as_JumpIfFalse()) {
      touch(j->cond(), i);
    }
  }
  if (graph->outputs()) {
    for (const auto* nv : *graph->outputs()) {
      if (nv->value() < value_count) {
        if (first[nv->value()] == kNone) first[nv->value()] = end;
        last[nv->value()] = end;
      }
    }
  }

  std::vector<Interval> intervals;
  for (size_t v = 0; v < value_count; ++v) {
    const fb::PlannedStorage* p = planned_of(values->Get(static_cast<uint32_t>(v)));
    if (p == nullptr || first[v] == kNone) continue;  // never touched: occupies nothing at any time
    intervals.push_back(Interval{mname + " value " + std::to_string(v), p->arena(), p->offset(),
                                 values->Get(static_cast<uint32_t>(v))->nbytes(), first[v], last[v]});
  }
  for (size_t d = 0; d < delegate_count; ++d) {
    const fb::Delegate* del = method.delegates()->Get(static_cast<uint32_t>(d));
    if (del->format() != fb::DelegateFormat::Graph || del->payload() == nullptr) continue;
    const fb::Graph* sub = del->payload_nested_root();
    if (sub == nullptr || sub->values() == nullptr) continue;
    for (uint32_t v = 0; v < sub->values()->size(); ++v) {
      const fb::PlannedStorage* p = planned_of(sub->values()->Get(v));
      if (p == nullptr) continue;
      for (uint32_t at : calls[d]) {
        intervals.push_back(Interval{mname + " delegate " + std::to_string(d) + " value " + std::to_string(v) +
                                         " (call at instruction " + std::to_string(at) + ")",
                                     p->arena(), p->offset(), sub->values()->Get(v)->nbytes(), at, at});
      }
    }
  }

  const auto* arenas = method.arenas();
  for (const Interval& i : intervals) {
    if (arenas == nullptr || i.arena >= arenas->size()) {
      out.push_back(i.name + ": arena " + std::to_string(i.arena) + " does not exist");
      continue;
    }
    const uint64_t size = arenas->Get(i.arena)->size();
    if (i.offset > size || i.nbytes > size - i.offset) {
      out.push_back(i.name + ": range " + range_text(i) + " is outside arena " + std::to_string(i.arena) + " (" +
                    std::to_string(size) + " bytes)");
    }
  }
  // Sweep by first instruction; pairs live together and overlapping in bytes are violations.
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.first < b.first; });
  for (size_t a = 0; a < intervals.size(); ++a) {
    for (size_t b = a + 1; b < intervals.size() && intervals[b].first <= intervals[a].last; ++b) {
      const Interval& x = intervals[a];
      const Interval& y = intervals[b];
      if (x.arena != y.arena || x.nbytes == 0 || y.nbytes == 0) continue;
      if (x.offset < y.offset + y.nbytes && y.offset < x.offset + x.nbytes) {
        out.push_back(x.name + " " + range_text(x) + " live [" + std::to_string(x.first) + ", " +
                      std::to_string(x.last) + "] and " + y.name + " " + range_text(y) + " live [" +
                      std::to_string(y.first) + ", " + std::to_string(y.last) + "] overlap in arena " +
                      std::to_string(x.arena));
      }
    }
  }
}

}  // namespace

std::vector<std::string> check_overlaps(const uint8_t* file, size_t size) {
  std::vector<std::string> out;
  FileHeader header;
  ErrorContext ctx;
  if (!decode_header(file, size, size, true, &header, &ctx).is_ok()) {
    out.push_back(std::string("header does not decode: ") + ctx.message);
    return out;
  }
  const uint8_t* fb_bytes = file + header.flatbuffer_offset;
  flatbuffers::Verifier verifier(fb_bytes, header.flatbuffer_size);
  if (!fb::VerifyProgramBuffer(verifier)) {
    out.push_back("the FlatBuffer does not pass the verifier");
    return out;
  }
  const fb::Program* program = fb::GetProgram(fb_bytes);
  if (program->methods() == nullptr) return out;
  for (uint32_t m = 0; m < program->methods()->size(); ++m) check_method(*program->methods()->Get(m), m, out);
  return out;
}

}  // namespace ember::exporter
