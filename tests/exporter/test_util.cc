#include "tests/exporter/test_util.h"

#include <unistd.h>

#include <random>

#include "exporter/importers/builder/graph_builder.h"
#include "runtime/program/validator.h"
#include "schema/program_generated.h"

namespace ember::exporter::testing {

std::string validate_with_runtime(const std::vector<uint8_t>& file) {
  FileHeader header;
  ErrorContext ctx;
  if (!decode_header(file.data(), file.size(), file.size(), true, &header, &ctx).is_ok()) {
    return std::string("header: ") + ctx.message;
  }
  const uint8_t* fb_bytes = file.data() + header.flatbuffer_offset;
  flatbuffers::Verifier verifier(fb_bytes, header.flatbuffer_size);
  if (!fb::VerifyProgramBuffer(verifier)) return "FlatBuffers verifier failed";
  const fb::Program* program = fb::GetProgram(fb_bytes);
  std::vector<SegmentData> segments;
  if (program->segments()) {
    for (const fb::Segment* s : *program->segments()) {
      if (header.segment_base + s->offset() + s->size() > file.size()) return "segment outside the file";
      SegmentData d;
      d.data = file.data() + header.segment_base + s->offset();
      d.size = s->size();
      d.kind = s->kind();
      segments.push_back(d);
    }
  }
  if (!validate_program(*program, header, Span<const SegmentData>(segments.data(), segments.size()), &ctx).is_ok()) {
    return std::string("validator: ") + ctx.message;
  }
  return "";
}

// A random DAG over [rows, width] activations: unary, binary, linear, concat and slice ops reading
// random earlier values, so lifetimes overlap in many ways.
Graph random_graph(uint64_t seed, bool symbolic) {
  std::mt19937_64 rng(seed);
  GraphBuilder b(seed);
  if (symbolic) b.symbol("rows", 1, 6);
  const DimSpec rows = symbolic ? DimSpec::sym("rows") : DimSpec(int64_t{3});
  std::vector<std::pair<ValueId, int64_t>> pool;  // value, width
  const int inputs = 1 + static_cast<int>(rng() % 2);
  for (int i = 0; i < inputs; ++i) {
    const int64_t width = 8 << (rng() % 4);
    pool.emplace_back(b.input("in" + std::to_string(i), ScalarType::F32, {rows, width}), width);
  }
  const int nodes = 5 + static_cast<int>(rng() % 25);
  for (int n = 0; n < nodes; ++n) {
    const auto [a, wa] = pool[rng() % pool.size()];
    ValueId out = kNoValue;
    int64_t width = wa;
    switch (rng() % 7) {
      case 0: out = b.relu(a); break;
      case 1: out = b.sigmoid(a); break;
      case 2: {
        std::vector<std::pair<ValueId, int64_t>> same;
        for (const auto& p : pool) if (p.second == wa) same.push_back(p);
        out = b.add(a, same[rng() % same.size()].first);
        break;
      }
      case 3: {
        width = 8 << (rng() % 5);
        std::string name = "w";  // appended, not "w" + ...: GCC 12 warns falsely (-Wrestrict) on that
        name += std::to_string(n);
        out = b.linear(a, b.random_uniform(name, {width, wa}, -1, 1));
        break;
      }
      case 4: {
        const auto [c, wc] = pool[rng() % pool.size()];
        out = b.concat({a, c}, 1);
        width = wa + wc;
        break;
      }
      case 5: {
        if (wa < 4) {
          out = b.relu(a);
          break;
        }
        width = wa / 2;
        out = b.slice(a, {1}, {0}, {width});
        break;
      }
      default: out = b.mul(a, a); break;
    }
    pool.emplace_back(out, width);
  }
  // One or two outputs among the node outputs (never an input).
  const int outputs = 1 + static_cast<int>(rng() % 2);
  for (int o = 0; o < outputs; ++o) {
    ValueId v = pool.back().first;
    if (o == 1) v = pool[static_cast<size_t>(inputs) + rng() % (pool.size() - static_cast<size_t>(inputs))].first;
    if (b.graph().is_output(v)) continue;
    b.output("out" + std::to_string(o), v);
  }
  return b.build();
}

}  // namespace ember::exporter::testing
