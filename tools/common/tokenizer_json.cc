#include "tools/common/tokenizer_json.h"

#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tools/common/host_io.h"

namespace ember::tools {
namespace {

using json = nlohmann::json;

// The Split patterns of the Llama-3 and Qwen2 releases (runtime/llm/pre_tokenizer.h).
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class Parser {
 public:
  explicit Parser(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void fail(const std::string& field, const json* value, const std::string& why) const {
    std::string message = name_ + ": " + field;
    if (value != nullptr) {
      std::string dumped = value->dump();
      if (dumped.size() > 120) dumped = dumped.substr(0, 117) + "...";
      message += " = " + dumped;
    }
    throw TokenizerJsonError(message + ": " + why);
  }

  // obj[key], or nullptr when absent.
  const json* find(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& require(const json& obj, const char* key, const std::string& path) const {
    const json* v = find(obj, key);
    if (v == nullptr) fail(path + "." + key, nullptr, "missing");
    return *v;
  }
  std::string type_of(const json& obj, const std::string& path) const {
    if (!obj.is_object()) fail(path, &obj, "expected an object");
    const json& t = require(obj, "type", path);
    if (!t.is_string()) fail(path + ".type", &t, "expected a string");
    return t.get<std::string>();
  }
  // A boolean field that must be absent or equal to `expected` (null counts as false).
  void expect_bool(const json& obj, const char* key, bool expected, const std::string& path, const char* why) const {
    const json* v = find(obj, key);
    const bool value = v != nullptr && !v->is_null() && (!v->is_boolean() || v->get<bool>());
    if (v != nullptr && !v->is_null() && !v->is_boolean()) fail(path + "." + key, v, "expected a boolean");
    if (value != expected) fail(path + "." + key, v, why);
  }
  bool get_bool(const json& obj, const char* key, bool fallback, const std::string& path) const {
    const json* v = find(obj, key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_boolean()) fail(path + "." + key, v, "expected a boolean");
    return v->get<bool>();
  }

  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// Byte-level alphabet: byte -> code point and back (GPT-2's bytes_to_unicode).
struct ByteLevelMap {
  uint32_t to_char[256];
  std::unordered_map<uint32_t, uint8_t> to_byte;
  ByteLevelMap() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<uint8_t>(b);
    }
  }
};
const ByteLevelMap& byte_level_map() {
  static const ByteLevelMap map;
  return map;
}

// Code points of a valid UTF-8 string (nlohmann::json validates strings while parsing).
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t length = 0;
    out.push_back(llm::decode_utf8(reinterpret_cast<const uint8_t*>(s.data()) + i, &length));
    i += length;
  }
  return out;
}

// What HF's ByteLevel decoder makes of one token (decoders/byte_level.rs, decode_chain): the bytes
// its characters stand for; a token with any character outside the alphabet is kept as its UTF-8.
bool byte_level_bytes(const std::string& token, std::string* bytes) {
  const ByteLevelMap& map = byte_level_map();
  bytes->clear();
  for (uint32_t cp : code_points(token)) {
    auto it = map.to_byte.find(cp);
    if (it == map.to_byte.end()) {
      *bytes = token;
      return false;
    }
    bytes->push_back(static_cast<char>(it->second));
  }
  return true;
}

// "▁" (U+2581), SentencePiece's stand-in for a space.
constexpr const char* kMetaspace = "\xE2\x96\x81";

// obj[key] when obj is an object and that is a string; else "\x01", which no caller looks for.
std::string string_field(const json& obj, const char* key) {
  if (!obj.is_object()) return "\x01";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "\x01";
}

// Replace with a String pattern `from` and content `to` (normalizer or decoder).
bool is_replace(const json& r, const char* from, const char* to) {
  return string_field(r, "type") == "Replace" && r.contains("pattern") && r["pattern"].is_object() &&
         r["pattern"].size() == 1 && string_field(r["pattern"], "String") == from && string_field(r, "content") == to;
}

void parse_normalizer(const Parser& p, const json& root, TokenizerData& out) {
  const json* n = p.find(root, "normalizer");
  if (n == nullptr || n->is_null()) return;
  const std::string type = p.type_of(*n, "normalizer");
  if (type == "NFC") {
    out.normalizer = llm::NormalizerKind::Nfc;
    return;
  }
  const char* implemented =
      "only NFC, Replace(\" \", \"\u2581\") and Sequence[Prepend(\"\u2581\"), Replace(\" \", \"\u2581\")] (or none) are "
      "implemented";
  if (type == "Replace") {
    if (!is_replace(*n, " ", kMetaspace)) p.fail("normalizer", n, implemented);
    out.normalizer = llm::NormalizerKind::Replace;
    return;
  }
  if (type == "Sequence") {
    const json& list = p.require(*n, "normalizers", "normalizer");
    if (list.is_array() && list.empty()) return;
    if (list.is_array() && list.size() == 1 && p.type_of(list[0], "normalizer.normalizers[0]") == "NFC") {
      out.normalizer = llm::NormalizerKind::Nfc;
      return;
    }
    if (list.is_array() && list.size() == 1 && is_replace(list[0], " ", kMetaspace)) {
      out.normalizer = llm::NormalizerKind::Replace;
      return;
    }
    const json prepend = {{"type", "Prepend"}, {"prepend", kMetaspace}};
    if (list.is_array() && list.size() == 2 && list[0] == prepend && is_replace(list[1], " ", kMetaspace)) {
      out.normalizer = llm::NormalizerKind::PrependReplace;
      return;
    }
    p.fail("normalizer.normalizers", &list, implemented);
  }
  p.fail("normalizer.type", &(*n)["type"], implemented);
}

void parse_byte_level_pre(const Parser& p, const json& bl, const std::string& path, bool use_regex) {
  p.expect_bool(bl, "add_prefix_space", false, path, "add_prefix_space is not implemented");
  const json* v = p.find(bl, "use_regex");
  const bool value = v == nullptr || v->is_null() ? true : (v->is_boolean() && v->get<bool>());
  if (value != use_regex) {
    p.fail(path + ".use_regex", v, use_regex ? "ByteLevel alone or after Digits must split with its GPT-2 regex"
                                             : "after a Split, ByteLevel must not split again");
  }
}

// HF Metaspace (pre-tokenizer or decoder): replacement "▁", prepend_scheme (or the older
// add_prefix_space, which HF maps to "always" and refuses when it contradicts prepend_scheme).
llm::MetaspacePrepend parse_metaspace(const Parser& p, const json& m, const std::string& path) {
  const json& replacement = p.require(m, "replacement", path);
  if (replacement != kMetaspace) p.fail(path + ".replacement", &replacement, "only \"\u2581\" is implemented");
  llm::MetaspacePrepend scheme = llm::MetaspacePrepend::Always;
  if (const json* s = p.find(m, "prepend_scheme"); s != nullptr && !s->is_null()) {
    if (*s == "always") {
      scheme = llm::MetaspacePrepend::Always;
    } else if (*s == "first") {
      scheme = llm::MetaspacePrepend::First;
    } else if (*s == "never") {
      scheme = llm::MetaspacePrepend::Never;
    } else {
      p.fail(path + ".prepend_scheme", s, "expected \"always\", \"first\" or \"never\"");
    }
  }
  if (const json* a = p.find(m, "add_prefix_space"); a != nullptr && !a->is_null()) {
    if (!a->is_boolean()) p.fail(path + ".add_prefix_space", a, "expected a boolean");
    if (a->get<bool>() != (scheme != llm::MetaspacePrepend::Never)) {
      p.fail(path + ".add_prefix_space", a, "contradicts prepend_scheme (HF tokenizers refuses this file too)");
    }
  }
  return scheme;
}

bool is_spm_normalizer(llm::NormalizerKind n) {
  return n == llm::NormalizerKind::Replace || n == llm::NormalizerKind::PrependReplace;
}

void parse_pre_tokenizer(const Parser& p, const json& root, TokenizerData& out) {
  const json& pt = p.require(root, "pre_tokenizer", "");
  if (pt.is_null()) {  // the whole normalized segment is one piece (Llama-2)
    out.pre_tokenizer = llm::PreTokenizerKind::Whole;
    return;
  }
  const std::string type = p.type_of(pt, "pre_tokenizer");
  const char* implemented =
      "only ByteLevel, Sequence[Split(pattern), ByteLevel], Sequence[Digits, ByteLevel], Metaspace (or none) are "
      "implemented";
  if (type == "ByteLevel") {
    parse_byte_level_pre(p, pt, "pre_tokenizer", true);
    out.pre_tokenizer = llm::PreTokenizerKind::Gpt2;
    return;
  }
  if (type == "Metaspace") {
    out.metaspace_prepend = parse_metaspace(p, pt, "pre_tokenizer");
    out.pre_tokenizer =
        p.get_bool(pt, "split", true, "pre_tokenizer") ? llm::PreTokenizerKind::MetaspaceSplit : llm::PreTokenizerKind::Metaspace;
    if (out.normalizer != llm::NormalizerKind::None) {
      p.fail("normalizer", nullptr, "a normalizer before the Metaspace pre-tokenizer is not implemented");
    }
    return;
  }
  if (type == "Split" && is_spm_normalizer(out.normalizer)) {
    // Gemma: Split(" ", MergedWithPrevious) after a normalizer that replaced every space: a no-op.
    const json expect = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"},
                         {"invert", false}};
    if (pt != expect) p.fail("pre_tokenizer", &pt, "only Split(\" \", MergedWithPrevious) after Replace(\" \", \"\u2581\") is implemented");
    out.pre_tokenizer = llm::PreTokenizerKind::Whole;
    return;
  }
  if (type != "Sequence") p.fail("pre_tokenizer.type", &pt["type"], implemented);
  const json& list = p.require(pt, "pretokenizers", "pre_tokenizer");
  if (!list.is_array() || list.size() != 2) p.fail("pre_tokenizer.pretokenizers", &list, implemented);
  const std::string first_path = "pre_tokenizer.pretokenizers[0]";
  const std::string bl_path = "pre_tokenizer.pretokenizers[1]";
  const std::string first_type = p.type_of(list[0], first_path);
  if (first_type == "Digits") {
    // SmolLM / StarCoder: every digit its own piece, then GPT-2's regex on the rest.
    if (!p.get_bool(list[0], "individual_digits", false, first_path)) {
      p.fail(first_path + ".individual_digits", p.find(list[0], "individual_digits"), "only true is implemented");
    }
    if (p.type_of(list[1], bl_path) != "ByteLevel") p.fail(bl_path + ".type", &list[1]["type"], "expected ByteLevel");
    parse_byte_level_pre(p, list[1], bl_path, true);
    out.pre_tokenizer = llm::PreTokenizerKind::Gpt2Digits;
    return;
  }
  if (first_type != "Split") p.fail(first_path + ".type", &list[0]["type"], "expected Split or Digits");
  const json& pattern = p.require(list[0], "pattern", first_path);
  const json* regex = pattern.is_object() ? p.find(pattern, "Regex") : nullptr;
  if (regex == nullptr || !regex->is_string()) p.fail(first_path + ".pattern", &pattern, "expected {\"Regex\": ...}");
  const std::string r = regex->get<std::string>();
  if (r == kLlama3Pattern) {
    out.pre_tokenizer = llm::PreTokenizerKind::Llama3;
  } else if (r == kQwen2Pattern) {
    out.pre_tokenizer = llm::PreTokenizerKind::Qwen2;
  } else {
    p.fail(first_path + ".pattern.Regex", regex, "not one of the implemented patterns (Llama-3, Qwen2)");
  }
  const json& behavior = p.require(list[0], "behavior", first_path);
  if (behavior != "Isolated") p.fail(first_path + ".behavior", &behavior, "only Isolated is implemented");
  p.expect_bool(list[0], "invert", false, first_path, "invert is not implemented");
  if (p.type_of(list[1], bl_path) != "ByteLevel") p.fail(bl_path + ".type", &list[1]["type"], "expected ByteLevel");
  parse_byte_level_pre(p, list[1], bl_path, false);
}

// The post-processor may only add a BOS ("<bos> $A"); ByteLevel post-processing changes offsets only.
void parse_template(const Parser& p, const json& tp, const std::string& path, TokenizerData& out,
                    const std::unordered_map<std::string, uint32_t>& ids_by_content) {
  const json& single = p.require(tp, "single", path);
  auto is_sequence_a = [](const json& item) {
    return item.is_object() && item.contains("Sequence") && item["Sequence"].value("id", "") == "A";
  };
  if (single.is_array() && single.size() == 1 && is_sequence_a(single[0])) return;
  if (!single.is_array() || single.size() != 2 || !single[0].is_object() || !single[0].contains("SpecialToken") ||
      !is_sequence_a(single[1])) {
    p.fail(path + ".single", &single, "only \"$A\" and \"<special> $A\" templates are implemented");
  }
  const std::string special = single[0]["SpecialToken"].value("id", "");
  const json& specials = p.require(tp, "special_tokens", path);
  const json* entry = specials.is_object() ? p.find(specials, special.c_str()) : nullptr;
  if (entry == nullptr) p.fail(path + ".special_tokens", &specials, "no entry for \"" + special + "\"");
  const json* ids = p.find(*entry, "ids");
  if (ids == nullptr || !ids->is_array() || ids->size() != 1 || !(*ids)[0].is_number_unsigned()) {
    p.fail(path + ".special_tokens." + special + ".ids", ids, "expected exactly one id");
  }
  out.add_bos = true;
  out.bos_id = (*ids)[0].get<uint32_t>();
  auto it = ids_by_content.find(special);
  if (it != ids_by_content.end() && it->second != out.bos_id) {
    p.fail(path + ".special_tokens." + special + ".ids", ids, "does not match the token's id");
  }
}

void parse_post_processor(const Parser& p, const json& root, TokenizerData& out,
                          const std::unordered_map<std::string, uint32_t>& ids_by_content) {
  const json* pp = p.find(root, "post_processor");
  if (pp == nullptr || pp->is_null()) return;
  const std::string type = p.type_of(*pp, "post_processor");
  if (type == "ByteLevel") return;
  if (type == "TemplateProcessing") return parse_template(p, *pp, "post_processor", out, ids_by_content);
  if (type != "Sequence") p.fail("post_processor.type", &(*pp)["type"], "only ByteLevel and TemplateProcessing are implemented");
  const json& list = p.require(*pp, "processors", "post_processor");
  if (!list.is_array()) p.fail("post_processor.processors", &list, "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "post_processor.processors[" + std::to_string(i) + "]";
    const std::string t = p.type_of(list[i], path);
    if (t == "ByteLevel") continue;
    if (t != "TemplateProcessing" || out.add_bos) p.fail(path + ".type", &list[i]["type"], "only ByteLevel and one TemplateProcessing are implemented");
    parse_template(p, list[i], path, out, ids_by_content);
  }
}

void parse_model(const Parser& p, const json& root, TokenizerData& out,
                 std::unordered_map<std::string, uint32_t>& vocab_ids) {
  const json& m = p.require(root, "model", "");
  const std::string type = p.type_of(m, "model");
  if (type != "BPE") p.fail("model.type", &m["type"], "only BPE is implemented");
  const json* dropout = p.find(m, "dropout");
  if (dropout != nullptr && !dropout->is_null()) p.fail("model.dropout", dropout, "BPE dropout is not implemented");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = p.find(m, key);
    if (v != nullptr && !v->is_null() && *v != "") p.fail(std::string("model.") + key, v, "only null or \"\" is implemented");
  }
  const bool byte_level = llm::is_byte_level(out.pre_tokenizer);
  out.byte_fallback = p.get_bool(m, "byte_fallback", false, "model");
  if (out.byte_fallback && byte_level) {
    p.fail("model.byte_fallback", p.find(m, "byte_fallback"), "byte fallback with a byte-level pre-tokenizer is not implemented");
  }
  out.fuse_unk = p.get_bool(m, "fuse_unk", false, "model");
  out.ignore_merges = p.get_bool(m, "ignore_merges", false, "model");

  const json& vocab = p.require(m, "vocab", "model");
  if (!vocab.is_object()) p.fail("model.vocab", nullptr, "expected an object");
  std::vector<const std::string*> by_id(vocab.size(), nullptr);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= vocab.size()) {
      p.fail("model.vocab[\"" + it.key() + "\"]", &it.value(), "ids must be 0 .. vocab size - 1");
    }
    const uint32_t id = it.value().get<uint32_t>();
    if (by_id[id] != nullptr) p.fail("model.vocab[\"" + it.key() + "\"]", &it.value(), "id used twice");
    by_id[id] = &it.key();
    vocab_ids[it.key()] = id;
  }
  out.model_token_count = static_cast<uint32_t>(vocab.size());
  out.token_offsets.assign(1, 0);
  std::string bytes;
  for (uint32_t id = 0; id < out.model_token_count; ++id) {
    // Byte-level: the bytes the characters stand for. SentencePiece layouts: the string itself.
    if (!byte_level) {
      bytes = *by_id[id];
    } else if (!byte_level_bytes(*by_id[id], &bytes)) {
      p.fail("model.vocab[\"" + *by_id[id] + "\"]", nullptr, "token has characters outside the byte-level alphabet");
    }
    out.token_bytes.insert(out.token_bytes.end(), bytes.begin(), bytes.end());
    out.token_offsets.push_back(static_cast<uint32_t>(out.token_bytes.size()));
  }
  if (const json* unk = p.find(m, "unk_token"); unk != nullptr && !unk->is_null()) {
    auto it = unk->is_string() ? vocab_ids.find(unk->get<std::string>()) : vocab_ids.end();
    if (it == vocab_ids.end()) p.fail("model.unk_token", unk, "not a token of model.vocab");
    out.unk_id = static_cast<int32_t>(it->second);
  }

  const json& merges = p.require(m, "merges", "model");
  if (!merges.is_array()) p.fail("model.merges", nullptr, "expected an array");
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    std::string left, right;
    if (merge.is_string()) {  // "left right" (tokenizers < 0.20 and the released files)
      const std::string s = merge.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        p.fail("model.merges[" + std::to_string(i) + "]", &merge, "expected two tokens separated by one space");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      p.fail("model.merges[" + std::to_string(i) + "]", &merge, "expected \"a b\" or [\"a\", \"b\"]");
    }
    auto l = vocab_ids.find(left), r = vocab_ids.find(right), joined = vocab_ids.find(left + right);
    if (l == vocab_ids.end() || r == vocab_ids.end() || joined == vocab_ids.end()) {
      p.fail("model.merges[" + std::to_string(i) + "]", &merge, "a token or the merged token is not in model.vocab");
    }
    out.merges.push_back({l->second, r->second});
  }
}

void parse_added_tokens(const Parser& p, const json& root, TokenizerData& out,
                        const std::unordered_map<std::string, uint32_t>& vocab_ids,
                        std::unordered_map<std::string, uint32_t>& ids_by_content) {
  const json* list = p.find(root, "added_tokens");
  if (list == nullptr || list->is_null()) return;
  if (!list->is_array()) p.fail("added_tokens", nullptr, "expected an array");
  std::vector<std::string> added_bytes;
  std::vector<bool> is_added;
  bool any_normalized = false, any_verbatim = false;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& a = (*list)[i];
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object()) p.fail(path, &a, "expected an object");
    const json& id = p.require(a, "id", path);
    const json& content = p.require(a, "content", path);
    if (!id.is_number_unsigned()) p.fail(path + ".id", &id, "expected an id");
    // Ids are dense: an added token's id is below the vocabulary plus the added tokens (a huge id
    // would otherwise size the table of added tokens).
    if (id.get<uint64_t>() >= uint64_t{out.model_token_count} + list->size()) {
      p.fail(path + ".id", &id, "is beyond model.vocab and the added tokens (" +
                                    std::to_string(out.model_token_count + list->size()) + " ids; ids must be dense)");
    }
    if (!content.is_string() || content.get<std::string>().empty()) p.fail(path + ".content", &content, "expected a non-empty string");
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      p.expect_bool(a, flag, false, path, "this added-token option is not implemented");
    }
    // normalized = true matches after normalization: the same text only when there is no normalizer.
    // HF splits the normalized=false tokens out first and the others in a second pass: with a mix
    // of both the single leftmost-longest pass of the runtime could differ.
    const bool normalized = p.get_bool(a, "normalized", false, path);
    if (normalized && out.normalizer != llm::NormalizerKind::None) {
      p.fail(path + ".normalized", &a["normalized"], "matching added tokens after the normalizer is not implemented");
    }
    (normalized ? any_normalized : any_verbatim) = true;
    if (any_normalized && any_verbatim) {
      p.fail(path + ".normalized", &a["normalized"], "a mix of normalized and verbatim added tokens is not implemented");
    }
    TokenizerData::AddedToken token{id.get<uint32_t>(), content.get<std::string>(), p.get_bool(a, "special", false, path)};
    if (!ids_by_content.emplace(token.content, token.id).second) p.fail(path + ".content", &content, "listed twice");
    // HF gives an added token whose content is in the vocabulary that token's id, whatever the
    // file says (AddedVocabulary::add_tokens).
    auto in_vocab = vocab_ids.find(token.content);
    if (token.id < out.model_token_count) {
      if (in_vocab == vocab_ids.end() || in_vocab->second != token.id) {
        p.fail(path + ".id", &id, "is a model.vocab id with other content");
      }
    } else if (in_vocab != vocab_ids.end()) {
      p.fail(path + ".content", &content, "is model.vocab's token " + std::to_string(in_vocab->second) +
                                              ", which HF would use instead of this id");
    } else {
      const size_t index = token.id - out.model_token_count;
      if (index >= added_bytes.size()) {
        added_bytes.resize(index + 1);
        is_added.resize(index + 1, false);
      }
      if (is_added[index]) p.fail(path + ".id", &id, "used by two added tokens");
      is_added[index] = true;
      if (llm::is_byte_level(out.pre_tokenizer)) {
        byte_level_bytes(token.content, &added_bytes[index]);
      } else {
        added_bytes[index] = token.content;  // the string, as the SentencePiece decoders see it
      }
    }
    out.added_tokens.push_back(std::move(token));
  }
  for (size_t i = 0; i < added_bytes.size(); ++i) {
    if (!is_added[i]) {
      p.fail("added_tokens", nullptr, "id " + std::to_string(out.model_token_count + i) +
                                          " is neither in model.vocab nor an added token (ids must be dense)");
    }
    out.token_bytes.insert(out.token_bytes.end(), added_bytes[i].begin(), added_bytes[i].end());
    out.token_offsets.push_back(static_cast<uint32_t>(out.token_bytes.size()));
  }
}

void parse_decoder(const Parser& p, const json& root, TokenizerData& out) {
  const json* d = p.find(root, "decoder");
  if (d == nullptr || d->is_null()) p.fail("decoder", d, "a decoder is required (HF joins tokens with spaces without one)");
  const std::string type = p.type_of(*d, "decoder");
  const char* implemented = "only ByteLevel, Metaspace and Sequence[Replace(\"\u2581\", \" \"), ByteFallback, Fuse, "
                            "Strip(\" \", n, 0) (optional)] are implemented";
  if (type == "ByteLevel") {
    out.decoder = llm::DecoderKind::ByteLevel;
  } else if (type == "Metaspace") {
    out.decoder = parse_metaspace(p, *d, "decoder") == llm::MetaspacePrepend::Never ? llm::DecoderKind::MetaspaceNever
                                                                                     : llm::DecoderKind::Metaspace;
  } else if (type == "Sequence") {
    const json& list = p.require(*d, "decoders", "decoder");
    const json byte_fallback = {{"type", "ByteFallback"}}, fuse = {{"type", "Fuse"}};
    if (!list.is_array() || list.size() < 3 || list.size() > 4 || !is_replace(list[0], kMetaspace, " ") ||
        list[1] != byte_fallback || list[2] != fuse) {
      p.fail("decoder.decoders", &list, implemented);
    }
    out.decoder = llm::DecoderKind::ReplaceByteFallback;
    if (list.size() == 4) {
      const json& strip = list[3];
      const std::string path = "decoder.decoders[3]";
      if (p.type_of(strip, path) != "Strip") p.fail(path + ".type", &strip["type"], "expected Strip");
      if (string_field(strip, "content") != " ") p.fail(path + ".content", p.find(strip, "content"), "only \" \" is implemented");
      const json& start = p.require(strip, "start", path);
      const json& stop = p.require(strip, "stop", path);
      if (!start.is_number_unsigned() || start.get<uint64_t>() > 255) p.fail(path + ".start", &start, "expected 0 .. 255");
      if (stop != 0) p.fail(path + ".stop", &stop, "only 0 is implemented (stripping the end of a stream)");
      out.decoder_strip_spaces = static_cast<uint8_t>(start.get<uint64_t>());
    }
  } else {
    p.fail("decoder.type", &(*d)["type"], implemented);
  }
  // Byte-level tokens are bytes, the others strings: each decoder reads one of the two.
  if ((out.decoder == llm::DecoderKind::ByteLevel) != llm::is_byte_level(out.pre_tokenizer)) {
    p.fail("decoder.type", &(*d)["type"],
           out.decoder == llm::DecoderKind::ByteLevel ? "the ByteLevel decoder needs a byte-level pre-tokenizer"
                                                      : "needs a pre-tokenizer that is not byte-level");
  }
}

// A special-token field of tokenizer_config.json: a string, null, or {"content": ...}.
std::string config_token(const Parser& p, const json& config, const char* key) {
  const json* v = p.find(config, key);
  if (v == nullptr || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object() && v->contains("content") && (*v)["content"].is_string()) return (*v)["content"].get<std::string>();
  p.fail(key, v, "expected a string, null or {\"content\": ...}");
}

void parse_config(const std::string& text, const std::string& name, TokenizerData& out,
                  const std::unordered_map<std::string, uint32_t>& vocab_ids,
                  const std::unordered_map<std::string, uint32_t>& ids_by_content) {
  const Parser p(name);
  json config;
  try {
    config = parse_json(text, name);
  } catch (const HostIoError& e) {
    throw TokenizerJsonError(e.what());
  }
  if (!config.is_object()) p.fail("(root)", nullptr, "expected an object");
  if (const json* t = p.find(config, "chat_template"); t != nullptr && !t->is_null()) {
    if (t->is_string()) {
      out.chat_template = t->get<std::string>();
    } else if (t->is_array()) {  // [{"name": ..., "template": ...}]: the "default" one
      for (const json& named : *t) {
        if (named.is_object() && named.value("name", "") == "default") out.chat_template = named.value("template", "");
      }
      if (out.chat_template.empty()) p.fail("chat_template", t, "a list of templates without a \"default\" one");
    } else {
      p.fail("chat_template", t, "expected a string");
    }
  }
  out.bos_token = config_token(p, config, "bos_token");
  out.eos_token = config_token(p, config, "eos_token");
  auto resolve = [&](const std::string& token, const char* key) -> int32_t {
    if (token.empty()) return -1;
    auto it = ids_by_content.find(token);
    if (it != ids_by_content.end()) return static_cast<int32_t>(it->second);
    it = vocab_ids.find(token);
    if (it != vocab_ids.end()) return static_cast<int32_t>(it->second);
    p.fail(key, &config[key], "not a token of the tokenizer");
  };
  out.bos_token_id = resolve(out.bos_token, "bos_token");
  out.eos_token_id = resolve(out.eos_token, "eos_token");
}

}  // namespace

uint32_t byte_level_char(uint8_t b) { return byte_level_map().to_char[b]; }

TokenizerData parse_tokenizer_json(const std::string& tokenizer_json, const std::string& config_json,
                                   const std::string& name) {
  const Parser p(name);
  json root;
  try {
    root = parse_json(tokenizer_json, name);
  } catch (const HostIoError& e) {
    throw TokenizerJsonError(e.what());
  }
  if (!root.is_object()) p.fail("(root)", nullptr, "expected an object");
  for (const char* key : {"truncation", "padding"}) {
    const json* v = p.find(root, key);
    if (v != nullptr && !v->is_null()) p.fail(key, v, "is not implemented (must be null)");
  }
  TokenizerData out;
  std::unordered_map<std::string, uint32_t> vocab_ids, ids_by_content;
  parse_normalizer(p, root, out);
  parse_pre_tokenizer(p, root, out);
  parse_model(p, root, out, vocab_ids);
  parse_added_tokens(p, root, out, vocab_ids, ids_by_content);
  parse_post_processor(p, root, out, ids_by_content);
  parse_decoder(p, root, out);
  if (out.add_bos && out.bos_id >= out.token_offsets.size() - 1) {
    p.fail("post_processor", nullptr, "the BOS id " + std::to_string(out.bos_id) + " is not a token");
  }
  if (!config_json.empty()) {
    const std::string config_name = name.size() >= 14 && name.compare(name.size() - 14, 14, "tokenizer.json") == 0
                                        ? name.substr(0, name.size() - 14) + "tokenizer_config.json"
                                        : "tokenizer_config.json";
    parse_config(config_json, config_name, out, vocab_ids, ids_by_content);
  }
  return out;
}

TokenizerData load_tokenizer_json(const std::string& tokenizer_path, const std::string& config_path) {
  auto read = [](const std::string& path) {
    try {
      return read_regular_file(path, JsonLimits{}.max_bytes);
    } catch (const HostIoError& e) {
      throw TokenizerJsonError(e.what());
    }
  };
  const std::string config = config_path.empty() ? std::string() : read(config_path);
  return parse_tokenizer_json(read(tokenizer_path), config, tokenizer_path);
}

llm::TokenizerDesc make_tokenizer_desc(const TokenizerData& data, std::vector<llm::AddedTokenDesc>* added_views) {
  added_views->clear();
  for (const TokenizerData::AddedToken& a : data.added_tokens) {
    added_views->push_back({a.id, a.content.data(), static_cast<uint32_t>(a.content.size()), a.special});
  }
  llm::TokenizerDesc desc;
  desc.token_bytes = Span<const uint8_t>(data.token_bytes.data(), data.token_bytes.size());
  desc.token_offsets = Span<const uint32_t>(data.token_offsets.data(), data.token_offsets.size());
  desc.model_token_count = data.model_token_count;
  desc.merges = Span<const llm::MergeRule>(data.merges.data(), data.merges.size());
  desc.added_tokens = Span<const llm::AddedTokenDesc>(added_views->data(), added_views->size());
  desc.pre_tokenizer = data.pre_tokenizer;
  desc.normalizer = data.normalizer;
  desc.ignore_merges = data.ignore_merges;
  desc.add_bos = data.add_bos;
  desc.bos_id = data.bos_id;
  desc.unk_id = data.unk_id;
  desc.fuse_unk = data.fuse_unk;
  desc.byte_fallback = data.byte_fallback;
  desc.metaspace_prepend = data.metaspace_prepend;
  desc.decoder = data.decoder;
  desc.decoder_strip_spaces = data.decoder_strip_spaces;
  return desc;
}

}  // namespace ember::tools
