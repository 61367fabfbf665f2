// Editing .pte bytes for error-path tests and fuzzing: header access, CRC recomputation, and
// FlatBuffer mutation through the generated object API, re-serialized with a correct header so the
// result reaches the verifier and the semantic validator.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/program/program_file.h"
#include "schema/program_generated.h"

namespace ember::testing {

// The header of `file` (CRC not checked). Precondition: file has at least 64 bytes.
FileHeader header_of(const std::vector<uint8_t>& file);
// Rewrites the header with `h` (and a fresh header CRC).
void write_header(std::vector<uint8_t>& file, const FileHeader& h);
// Recomputes the FlatBuffer CRC (over the range the header names, clamped to the file) and the
// header CRC, so edits reach the verifier.
void recompute_crcs(std::vector<uint8_t>& file);
// `file` with its FlatBuffer replaced by `flatbuffer` (segments kept, moved to a new 64 KiB-aligned
// base when the FlatBuffer grew past the old one), CRCs correct.
std::vector<uint8_t> with_flatbuffer(const std::vector<uint8_t>& file, const std::vector<uint8_t>& flatbuffer);
// Unpacks the Program, applies `edit`, packs it again (delegate payloads 64-aligned as the
// serializer writes them) and returns the new file.
std::vector<uint8_t> mutate_program(const std::vector<uint8_t>& file, const std::function<void(fb::ProgramT&)>& edit);
// Applies `edit` to a GRAPH delegate payload (a nested Graph) in place.
void mutate_payload(fb::DelegateT& delegate, const std::function<void(fb::GraphT&)>& edit);
// The Program table of a file (no checks).
const fb::Program* program_of(const std::vector<uint8_t>& file);

}  // namespace ember::testing
