#include "tools/common/npy.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include "tools/common/host_io.h"

namespace ember::tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlign = 64;         // numpy's ARRAY_ALIGN
constexpr size_t kGrowthDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS
constexpr size_t kMaxRank = 64;       // numpy 2 allows 64 dims
constexpr size_t kMaxHeaderSize = 1u << 20;

struct DescrEntry {
  ScalarType dtype;
  const char* descr;
};
constexpr DescrEntry kDescrs[] = {
    {ScalarType::F32, "<f4"}, {ScalarType::F16, "<f2"},  {ScalarType::I8, "|i1"},
    {ScalarType::U8, "|u1"},  {ScalarType::I16, "<i2"},  {ScalarType::I32, "<i4"},
    {ScalarType::I64, "<i8"}, {ScalarType::Bool, "|b1"},
};

bool fail(std::string* error, const std::string& message) {
  if (error != nullptr) *error = message;
  return false;
}

// Minimal parser for the header's Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const char* text, size_t size) : p_(text), end_(text + size) {}

  bool parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape, std::string* error) {
    bool has_descr = false, has_fortran = false, has_shape = false;
    skip_space();
    if (!consume('{')) return fail(error, "npy header: expected '{'");
    while (true) {
      skip_space();
      if (consume('}')) break;
      std::string key;
      if (!parse_string(&key)) return fail(error, "npy header: expected a quoted key");
      skip_space();
      if (!consume(':')) return fail(error, "npy header: expected ':' after '" + key + "'");
      skip_space();
      if (key == "descr") {
        if (has_descr) return fail(error, "npy header: duplicate 'descr'");
        if (!parse_string(descr)) return fail(error, "npy header: 'descr' must be a string");
        has_descr = true;
      } else if (key == "fortran_order") {
        if (has_fortran) return fail(error, "npy header: duplicate 'fortran_order'");
        if (consume_word("True")) {
          *fortran = true;
        } else if (consume_word("False")) {
          *fortran = false;
        } else {
          return fail(error, "npy header: 'fortran_order' must be True or False");
        }
        has_fortran = true;
      } else if (key == "shape") {
        if (has_shape) return fail(error, "npy header: duplicate 'shape'");
        std::string message;
        if (!parse_shape(shape, &message)) return fail(error, "npy header: " + message);
        has_shape = true;
      } else {
        return fail(error, "npy header: unknown key '" + key + "'");
      }
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume('}')) break;
      return fail(error, "npy header: expected ',' or '}'");
    }
    skip_space();
    if (p_ != end_) return fail(error, "npy header: trailing characters after '}'");
    if (!has_descr || !has_fortran || !has_shape) {
      return fail(error, "npy header: needs 'descr', 'fortran_order' and 'shape'");
    }
    return true;
  }

 private:
  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool consume(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool consume_word(const char* word) {
    const size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return false;
    p_ += n;
    return true;
  }
  // A '...' or "..." literal without escapes (numpy never writes any).
  bool parse_string(std::string* out) {
    if (p_ >= end_ || (*p_ != '\'' && *p_ != '"')) return false;
    const char quote = *p_++;
    const char* begin = p_;
    while (p_ < end_ && *p_ != quote) {
      if (*p_ == '\\' || *p_ == '\n') return false;
      ++p_;
    }
    if (p_ >= end_) return false;
    out->assign(begin, p_);
    ++p_;
    return true;
  }
  bool parse_shape(std::vector<int64_t>* shape, std::string* message) {
    shape->clear();
    if (!consume('(')) return (*message = "'shape' must be a tuple", false);
    while (true) {
      skip_space();
      if (consume(')')) return true;
      if (p_ >= end_ || *p_ < '0' || *p_ > '9') {
        return (*message = "'shape' entries must be non-negative integers", false);
      }
      int64_t value = 0;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
        const int digit = *p_++ - '0';
        if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return (*message = "'shape' entry overflows int64", false);
        }
        value = value * 10 + digit;
      }
      if (shape->size() == kMaxRank) return (*message = "'shape' has too many dims", false);
      shape->push_back(value);
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume(')')) {
        // A one-element tuple needs its comma: "(3)" is an int in Python.
        if (shape->size() == 1) return (*message = "'shape' (n) is not a tuple", false);
        return true;
      }
      return (*message = "'shape': expected ',' or ')'", false);
    }
  }

  const char* p_;
  const char* end_;
};

bool element_count(const std::vector<int64_t>& dims, ScalarType dtype, uint64_t* numel,
                   uint64_t* nbytes, std::string* error) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return fail(error, "npy: negative dim " + std::to_string(d));
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
      return fail(error, "npy: element count overflows");
    }
    n *= static_cast<uint64_t>(d);
  }
  const uint64_t elem = static_cast<uint64_t>(bits_of(dtype) / 8);
  if (elem != 0 && n > std::numeric_limits<uint64_t>::max() / elem) {
    return fail(error, "npy: byte size overflows");
  }
  *numel = n;
  *nbytes = n * elem;
  return true;
}

std::string format_shape(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (dims.size() == 1) s += ",";
  s += ")";
  return s;
}

}  // namespace

uint64_t NpyArray::numel() const {
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  return n;
}

const char* npy_descr(ScalarType dtype) {
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == dtype) return e.descr;
  }
  return nullptr;
}

bool parse_npy(const uint8_t* bytes, size_t size, NpyArray* out, std::string* error) {
  if (out == nullptr) return fail(error, "npy: null output");
  if (bytes == nullptr && size != 0) return fail(error, "npy: null input");
  if (size < kMagicSize + 2 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    return fail(error, "npy: bad magic (not a .npy file)");
  }
  const uint8_t major = bytes[6], minor = bytes[7];
  size_t header_size = 0, prefix = 0;
  if (major == 1 && minor == 0) {
    if (size < 10) return fail(error, "npy: truncated header length");
    header_size = static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8;
    prefix = 10;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (size < 12) return fail(error, "npy: truncated header length");
    const uint32_t n = static_cast<uint32_t>(bytes[8]) | static_cast<uint32_t>(bytes[9]) << 8 |
                       static_cast<uint32_t>(bytes[10]) << 16 |
                       static_cast<uint32_t>(bytes[11]) << 24;
    if (n > kMaxHeaderSize)
      return fail(error, "npy: header length " + std::to_string(n) + " too big");
    header_size = n;
    prefix = 12;
  } else {
    return fail(error, "npy: unsupported format version " + std::to_string(major) + "." +
                           std::to_string(minor));
  }
  if (header_size > size - prefix) return fail(error, "npy: header runs past the end of the file");
  const char* header = reinterpret_cast<const char*>(bytes + prefix);
  for (size_t i = 0; i < header_size; ++i) {
    if (header[i] == '\0') return fail(error, "npy header: NUL byte");
  }
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> dims;
  if (!HeaderParser(header, header_size).parse(&descr, &fortran, &dims, error)) return false;
  if (fortran) return fail(error, "npy: fortran_order True is not supported (C order only)");

  ScalarType dtype = ScalarType::Invalid;
  for (const DescrEntry& e : kDescrs) {
    // One-byte types carry no byte order: accept '|', '<' and '=' alike.
    if (descr == e.descr ||
        (e.descr[0] == '|' && descr.size() == 3 && (descr[0] == '<' || descr[0] == '=') &&
         descr.compare(1, 2, e.descr + 1) == 0)) {
      dtype = e.dtype;
      break;
    }
  }
  if (dtype == ScalarType::Invalid) {
    return fail(error, "npy: unsupported dtype '" + descr +
                           "' (little-endian f4, f2, i1, u1, i2, i4, i8, b1 only)");
  }
  uint64_t numel = 0, nbytes = 0;
  if (!element_count(dims, dtype, &numel, &nbytes, error)) return false;
  const size_t data_offset = prefix + header_size;
  const uint64_t available = static_cast<uint64_t>(size - data_offset);
  if (nbytes != available) {
    return fail(error, "npy: shape " + format_shape(dims) + " of " + descr + " needs " +
                           std::to_string(nbytes) + " bytes, file has " +
                           std::to_string(available));
  }
  out->dtype = dtype;
  out->dims = std::move(dims);
  out->data.assign(bytes + data_offset, bytes + size);
  return true;
}

bool read_npy(const std::string& path, NpyArray* out, std::string* error, uint64_t max_bytes) {
  // A regular file of at most max_bytes, read exactly: a FIFO or /dev/zero is refused, not drained.
  std::string bytes;
  try {
    bytes = read_regular_file(path, max_bytes);
  } catch (const HostIoError& e) {  // the message names the path
    return fail(error, e.what());
  } catch (const std::exception& e) {  // bad_alloc for a file that size
    return fail(error, path + ": " + e.what());
  }
  if (!parse_npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), out, error)) {
    if (error != nullptr) *error = path + ": " + *error;
    return false;
  }
  return true;
}

bool serialize_npy(const NpyArray& array, std::vector<uint8_t>* out, std::string* error) {
  if (out == nullptr) return fail(error, "npy: null output");
  const char* descr = npy_descr(array.dtype);
  if (descr == nullptr) {
    return fail(error, std::string("npy: dtype ") + to_string(array.dtype) + " has no NumPy dtype");
  }
  uint64_t numel = 0, nbytes = 0;
  if (!element_count(array.dims, array.dtype, &numel, &nbytes, error)) return false;
  if (nbytes != array.data.size()) {
    return fail(error, "npy: shape " + format_shape(array.dims) + " needs " +
                           std::to_string(nbytes) + " bytes, got " +
                           std::to_string(array.data.size()));
  }
  // As numpy.lib.format._write_array_header: keys sorted, repr() values, spare spaces so the
  // first dim can grow in place, then padding so the data starts at a multiple of 64.
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + format_shape(array.dims) + ", }";
  if (!array.dims.empty()) {
    const size_t digits = std::to_string(array.dims[0]).size();
    if (digits < kGrowthDigits) header.append(kGrowthDigits - digits, ' ');
  }
  size_t prefix = kMagicSize + 2 + 2;
  uint8_t major = 1;
  size_t total = header.size() + 1;  // + '\n'
  size_t pad = kAlign - (prefix + total) % kAlign;
  if (total + pad > 0xFFFF) {
    major = 2;
    prefix = kMagicSize + 2 + 4;
    pad = kAlign - (prefix + total) % kAlign;
  }
  header.append(pad, ' ');
  header.push_back('\n');
  const size_t header_size = header.size();
  out->clear();
  out->reserve(prefix + header_size + array.data.size());
  out->insert(out->end(), kMagic, kMagic + kMagicSize);
  out->push_back(major);
  out->push_back(0);
  out->push_back(static_cast<uint8_t>(header_size));
  out->push_back(static_cast<uint8_t>(header_size >> 8));
  if (major == 2) {
    out->push_back(static_cast<uint8_t>(header_size >> 16));
    out->push_back(static_cast<uint8_t>(header_size >> 24));
  }
  out->insert(out->end(), header.begin(), header.end());
  out->insert(out->end(), array.data.begin(), array.data.end());
  return true;
}

bool write_npy(const std::string& path, const NpyArray& array, std::string* error) {
  std::vector<uint8_t> bytes;
  if (!serialize_npy(array, &bytes, error)) return false;
  try {
    write_file_atomically(path, bytes.data(), bytes.size());
  } catch (const HostIoError& e) {  // the message names the path
    return fail(error, e.what());
  } catch (const std::exception& e) {  // bad_alloc for a file that size
    return fail(error, path + ": " + e.what());
  }
  return true;
}

std::vector<std::string> output_file_names(const std::vector<std::string>& names) {
  std::vector<std::string> files;
  std::set<std::string> taken;  // lower-case
  auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  for (size_t i = 0; i < names.size(); ++i) {
    std::string base = names[i];
    for (char& c : base) {
      const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      if (!keep) c = '_';
    }
    if (base.find_first_not_of('.') == std::string::npos) base = "output_" + std::to_string(i);
    std::string file = base;
    for (int k = 1; taken.count(lower(file)) != 0; ++k) file = base + "_" + std::to_string(i) + (k > 1 ? "_" + std::to_string(k) : "");
    taken.insert(lower(file));
    files.push_back(file + ".npy");
  }
  return files;
}

}  // namespace ember::tools
