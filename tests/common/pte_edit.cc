#include "tests/common/pte_edit.h"

#include <algorithm>
#include <cstring>

#include "runtime/core/hash.h"

namespace ember::testing {

FileHeader header_of(const std::vector<uint8_t>& file) {
  FileHeader h;
  auto get = [&](size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{file[at + i]} << (8 * i);
    return v;
  };
  h.major = static_cast<uint16_t>(get(4, 2));
  h.minor = static_cast<uint16_t>(get(6, 2));
  h.header_size = static_cast<uint32_t>(get(8, 4));
  h.min_runtime_version = static_cast<uint32_t>(get(12, 4));
  h.flatbuffer_offset = static_cast<uint32_t>(get(16, 4));
  h.flatbuffer_size = static_cast<uint32_t>(get(20, 4));
  h.segment_base = get(24, 8);
  h.segment_size = get(32, 8);
  h.required_features = get(40, 8);
  h.flatbuffer_crc32c = static_cast<uint32_t>(get(48, 4));
  h.flags = static_cast<uint32_t>(get(52, 4));
  return h;
}

void write_header(std::vector<uint8_t>& file, const FileHeader& h) { encode_header(h, file.data()); }

void recompute_crcs(std::vector<uint8_t>& file) {
  if (file.size() < kHeaderSize) return;
  FileHeader h = header_of(file);
  const uint64_t begin = std::min<uint64_t>(h.flatbuffer_offset, file.size());
  const uint64_t end = std::min<uint64_t>(begin + h.flatbuffer_size, file.size());
  h.flatbuffer_crc32c = crc32c(file.data() + begin, static_cast<size_t>(end - begin));
  // Keep the reserved word as it is (encode_header zeroes it).
  uint8_t reserved[4];
  std::memcpy(reserved, file.data() + 56, 4);
  encode_header(h, file.data());
  std::memcpy(file.data() + 56, reserved, 4);
  const uint32_t crc = crc32c(file.data(), 60);
  for (int i = 0; i < 4; ++i) file[60 + i] = static_cast<uint8_t>(crc >> (8 * i));
}

std::vector<uint8_t> with_flatbuffer(const std::vector<uint8_t>& file, const std::vector<uint8_t>& flatbuffer) {
  FileHeader h = header_of(file);
  const uint64_t fb_end = kHeaderSize + flatbuffer.size();
  uint64_t base = 0;
  if (h.segment_size != 0) {
    base = std::max<uint64_t>(h.segment_base, (fb_end + kConstantSegmentAlignment - 1) / kConstantSegmentAlignment *
                                                   kConstantSegmentAlignment);
  }
  std::vector<uint8_t> out(h.segment_size != 0 ? base + h.segment_size : fb_end, 0);
  std::memcpy(out.data() + kHeaderSize, flatbuffer.data(), flatbuffer.size());
  if (h.segment_size != 0) {
    std::memcpy(out.data() + base, file.data() + h.segment_base, static_cast<size_t>(h.segment_size));
  }
  h.flatbuffer_offset = kHeaderSize;
  h.flatbuffer_size = static_cast<uint32_t>(flatbuffer.size());
  h.segment_base = base;
  h.flatbuffer_crc32c = crc32c(flatbuffer.data(), flatbuffer.size());
  encode_header(h, out.data());
  return out;
}

namespace {

template <typename T, typename F>
auto pack_all(flatbuffers::FlatBufferBuilder& fbb, const std::vector<std::unique_ptr<T>>& items, F create) {
  std::vector<decltype(create(fbb, items[0].get()))> offsets;
  for (const auto& item : items) offsets.push_back(create(fbb, item.get()));
  return offsets;
}

flatbuffers::Offset<fb::Delegate> pack_delegate(flatbuffers::FlatBufferBuilder& fbb, const fb::DelegateT& d) {
  const auto backend_id = fbb.CreateString(d.backend_id);
  if (!d.payload.empty()) fbb.PreAlign(d.payload.size(), 64);  // 64-aligned as the serializer writes it
  const auto payload = fbb.CreateVector(d.payload);
  std::vector<flatbuffers::Offset<fb::CompileSpec>> specs;
  for (const auto& s : d.compile_specs) specs.push_back(fb::CreateCompileSpec(fbb, s.get()));
  const auto specs_vec = fbb.CreateVector(specs);
  fb::DelegateBuilder b(fbb);
  b.add_backend_id(backend_id);
  b.add_format(d.format);
  b.add_format_version(d.format_version);
  b.add_payload(payload);
  b.add_segment(d.segment);
  b.add_compile_specs(specs_vec);
  return b.Finish();
}

flatbuffers::Offset<fb::Method> pack_method(flatbuffers::FlatBufferBuilder& fbb, const fb::MethodT& m) {
  const auto name = fbb.CreateString(m.name);
  const auto graph = m.graph ? fb::CreateGraph(fbb, m.graph.get()) : flatbuffers::Offset<fb::Graph>();
  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  for (const auto& a : m.arenas) arenas.push_back(fb::CreateArena(fbb, a.get()));
  const auto arenas_vec = fbb.CreateVector(arenas);
  std::vector<flatbuffers::Offset<fb::Delegate>> delegates;
  for (const auto& d : m.delegates) delegates.push_back(pack_delegate(fbb, *d));
  const auto delegates_vec = fbb.CreateVector(delegates);
  fb::MethodBuilder b(fbb);
  b.add_name(name);
  if (m.graph) b.add_graph(graph);
  b.add_arenas(arenas_vec);
  b.add_delegates(delegates_vec);
  b.add_scratch_bytes(m.scratch_bytes);
  return b.Finish();
}

}  // namespace

const fb::Program* program_of(const std::vector<uint8_t>& file) {
  const FileHeader h = header_of(file);
  return fb::GetProgram(file.data() + h.flatbuffer_offset);
}

std::vector<uint8_t> mutate_program(const std::vector<uint8_t>& file, const std::function<void(fb::ProgramT&)>& edit) {
  std::unique_ptr<fb::ProgramT> p(program_of(file)->UnPack());
  edit(*p);
  flatbuffers::FlatBufferBuilder fbb;
  const auto producer = fbb.CreateString(p->producer);
  std::vector<flatbuffers::Offset<fb::Method>> methods;
  for (const auto& m : p->methods) methods.push_back(pack_method(fbb, *m));
  const auto methods_vec = fbb.CreateVector(methods);
  std::vector<flatbuffers::Offset<fb::Segment>> segments;
  for (const auto& s : p->segments) segments.push_back(fb::CreateSegment(fbb, s.get()));
  const auto segments_vec = fbb.CreateVector(segments);
  std::vector<flatbuffers::Offset<fb::StateDecl>> states;
  for (const auto& s : p->states) states.push_back(fb::CreateStateDecl(fbb, s.get()));
  const auto states_vec = fbb.CreateVector(states);
  std::vector<flatbuffers::Offset<fb::Symbol>> symbols;
  for (const auto& s : p->symbols) symbols.push_back(fb::CreateSymbol(fbb, s.get()));
  const auto symbols_vec = fbb.CreateVector(symbols);
  fb::ProgramBuilder b(fbb);
  b.add_producer(producer);
  b.add_methods(methods_vec);
  b.add_segments(segments_vec);
  b.add_states(states_vec);
  b.add_symbols(symbols_vec);
  b.add_required_features(p->required_features);
  fb::FinishProgramBuffer(fbb, b.Finish());
  return with_flatbuffer(file, std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()));
}

void mutate_payload(fb::DelegateT& delegate, const std::function<void(fb::GraphT&)>& edit) {
  std::vector<uint8_t> aligned(delegate.payload);  // heap copies are suitably aligned
  std::unique_ptr<fb::GraphT> g(flatbuffers::GetRoot<fb::Graph>(aligned.data())->UnPack());
  edit(*g);
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fb::CreateGraph(fbb, g.get()));
  delegate.payload.assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace ember::testing
