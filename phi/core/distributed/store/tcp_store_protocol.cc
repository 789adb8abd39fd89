#include "phi/core/distributed/store/tcp_store_protocol.h"

#include <cstring>

namespace phi {
namespace distributed {
namespace tcpstore {
namespace {

// Bounds-checked little-endian reader over one frame's payload.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool U32(uint32_t* v) {
    if (n_ - off_ < 4) return false;
    *v = static_cast<uint32_t>(p_[off_]) | static_cast<uint32_t>(p_[off_ + 1]) << 8 |
         static_cast<uint32_t>(p_[off_ + 2]) << 16 | static_cast<uint32_t>(p_[off_ + 3]) << 24;
    off_ += 4;
    return true;
  }
  bool I64(int64_t* v) {
    if (n_ - off_ < 8) return false;
    uint64_t u = 0;
    for (int i = 7; i >= 0; --i) u = (u << 8) | p_[off_ + i];
    std::memcpy(v, &u, sizeof(u));
    off_ += 8;
    return true;
  }
  // Checks the announced length against both the limit and the bytes actually left
  // before touching memory, so a lying length costs nothing.
  const uint8_t* Bytes(uint32_t len) {
    if (n_ - off_ < len) return nullptr;
    const uint8_t* r = p_ + off_;
    off_ += len;
    return r;
  }
  size_t left() const { return n_ - off_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
};

void PutU32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void PutI64(std::vector<uint8_t>* out, int64_t v) {
  uint64_t u;
  std::memcpy(&u, &v, sizeof(u));
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(u >> (8 * i)));
}
void PutBytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  PutU32(out, static_cast<uint32_t>(n));
  const uint8_t* b = static_cast<const uint8_t*>(p);
  out->insert(out->end(), b, b + n);
}

bool Fail(std::string* error, const std::string& why) {
  if (error) *error = why;
  return false;
}

// Reads `num` length-prefixed entries (the keys or the values of a frame) into `out`. Each
// length is checked against `max_len` and against what is left of the payload before its
// bytes are touched; errors name the entry as `what` ("key", "value").
template <typename Entry>
bool ReadEntries(Reader* r, uint32_t num, const std::string& what, size_t max_len,
                 std::vector<Entry>* out, std::string* error) {
  out->reserve(num);
  for (uint32_t i = 0; i < num; ++i) {
    uint32_t len = 0;
    if (!r->U32(&len)) return Fail(error, "truncated " + what + " length");
    if (len > max_len) {
      return Fail(error, what + " of " + std::to_string(len) + " bytes exceeds the limit of " +
                             std::to_string(max_len));
    }
    const uint8_t* b = r->Bytes(len);
    if (!b) return Fail(error, what + " runs past the end of the frame");
    // std::string (keys) and std::vector<uint8_t> (values) both build from a range of
    // their own element type.
    const auto* first = reinterpret_cast<const typename Entry::value_type*>(b);
    out->emplace_back(first, first + len);
  }
  return true;
}

}  // namespace

const char* CommandName(uint8_t type) {
  switch (static_cast<Command>(type)) {
    case Command::kSet: return "set";
    case Command::kGet: return "get";
    case Command::kAdd: return "add";
    case Command::kCompareSet: return "compare_set";
    case Command::kWait: return "wait";
    case Command::kCheck: return "check";
    case Command::kDeleteKey: return "delete_key";
    case Command::kNumKeys: return "num_keys";
    case Command::kAppend: return "append";
    case Command::kMultiGet: return "multi_get";
    case Command::kMultiSet: return "multi_set";
    case Command::kAuth: return "auth";
    case Command::kPing: return "ping";
    case Command::kSetOnClose: return "set_on_close";
  }
  return "unknown";
}

ParseStatus ParseFrame(const uint8_t* data, size_t size, Frame* frame, size_t* consumed,
                       std::string* error) {
  *consumed = 0;
  if (size < kHeaderBytes) return ParseStatus::kIncomplete;
  Reader header(data + 1, 4);
  uint32_t payload_len = 0;
  header.U32(&payload_len);
  if (payload_len > kMaxPayloadBytes) {
    Fail(error, "frame payload of " + std::to_string(payload_len) + " bytes exceeds the limit of " +
                    std::to_string(kMaxPayloadBytes));
    return ParseStatus::kMalformed;
  }
  if (size - kHeaderBytes < payload_len) return ParseStatus::kIncomplete;

  Reader r(data + kHeaderBytes, payload_len);
  Frame f;
  f.type = data[0];
  uint32_t num = 0;
  if (!r.I64(&f.integer) || !r.U32(&num)) {
    Fail(error, "frame payload too short for its fixed fields");
    return ParseStatus::kMalformed;
  }
  if (num > kMaxKeys) {
    Fail(error, std::to_string(num) + " keys exceed the limit of " + std::to_string(kMaxKeys));
    return ParseStatus::kMalformed;
  }
  // Each entry needs at least its 4-byte length, so a count the payload cannot hold is
  // refused before reserving anything.
  if (static_cast<size_t>(num) * 4 > r.left()) {
    Fail(error, "key count " + std::to_string(num) + " does not fit in the payload");
    return ParseStatus::kMalformed;
  }
  if (!ReadEntries(&r, num, "key", kMaxKeyBytes, &f.keys, error)) {
    return ParseStatus::kMalformed;
  }
  if (!r.U32(&num)) {
    Fail(error, "truncated value count");
    return ParseStatus::kMalformed;
  }
  if (num > kMaxKeys || static_cast<size_t>(num) * 4 > r.left()) {
    Fail(error, "value count " + std::to_string(num) + " is over the limit or the payload");
    return ParseStatus::kMalformed;
  }
  if (!ReadEntries(&r, num, "value", kMaxValueBytes, &f.values, error)) {
    return ParseStatus::kMalformed;
  }
  if (r.left() != 0) {
    Fail(error, std::to_string(r.left()) + " trailing bytes after the last value");
    return ParseStatus::kMalformed;
  }
  *frame = std::move(f);
  *consumed = kHeaderBytes + payload_len;
  return ParseStatus::kOk;
}

bool ValidateRequest(const Frame& f, std::string* error) {
  const size_t k = f.keys.size(), v = f.values.size();
  auto shape = [&](bool ok, const char* want) {
    return ok ? true
              : Fail(error, std::string(CommandName(f.type)) + " needs " + want + ", got " +
                                std::to_string(k) + " key(s) and " + std::to_string(v) +
                                " value(s)");
  };
  switch (static_cast<Command>(f.type)) {
    case Command::kSet:
    case Command::kAppend: return shape(k == 1 && v == 1, "1 key and 1 value");
    case Command::kGet:
      if (f.integer < 0) return Fail(error, "get with a negative timeout");
      return shape(k == 1 && v == 0, "1 key");
    case Command::kAdd:
    case Command::kDeleteKey: return shape(k == 1 && v == 0, "1 key");
    case Command::kCompareSet: return shape(k == 1 && v == 2, "1 key and 2 values");
    case Command::kWait:
    case Command::kMultiGet:
      if (f.integer < 0) return Fail(error, "wait with a negative timeout");
      return shape(v == 0, "keys only");
    case Command::kCheck: return shape(v == 0, "keys only");
    case Command::kNumKeys:
    case Command::kPing: return shape(k == 0 && v == 0, "no keys or values");
    case Command::kMultiSet: return shape(k == v, "as many values as keys");
    case Command::kSetOnClose: return shape(k == 1 && v <= 1, "1 key and at most 1 value");
    case Command::kAuth:
      return shape(k == 0 && v == 1 && f.values[0].size() == kDigestBytes,
                   "one 32-byte digest");
  }
  return Fail(error, "unknown command " + std::to_string(f.type));
}

bool EncodeFrame(const Frame& f, std::vector<uint8_t>* out, std::string* error) {
  if (f.keys.size() > kMaxKeys || f.values.size() > kMaxKeys) {
    return Fail(error, "more than " + std::to_string(kMaxKeys) + " keys or values in one message");
  }
  size_t payload = 8 + 4 + 4;
  for (const auto& key : f.keys) {
    if (key.size() > kMaxKeyBytes) {
      return Fail(error, "key '" + key.substr(0, 64) + "...' of " + std::to_string(key.size()) +
                             " bytes exceeds the limit of " + std::to_string(kMaxKeyBytes));
    }
    payload += 4 + key.size();
  }
  for (const auto& value : f.values) {
    if (value.size() > kMaxValueBytes) {
      return Fail(error, "value of " + std::to_string(value.size()) +
                             " bytes exceeds the limit of " + std::to_string(kMaxValueBytes));
    }
    payload += 4 + value.size();
  }
  if (payload > kMaxPayloadBytes) {
    return Fail(error, "message of " + std::to_string(payload) + " bytes exceeds the limit of " +
                           std::to_string(kMaxPayloadBytes));
  }
  out->reserve(out->size() + kHeaderBytes + payload);
  out->push_back(f.type);
  PutU32(out, static_cast<uint32_t>(payload));
  PutI64(out, f.integer);
  PutU32(out, static_cast<uint32_t>(f.keys.size()));
  for (const auto& key : f.keys) PutBytes(out, key.data(), key.size());
  PutU32(out, static_cast<uint32_t>(f.values.size()));
  for (const auto& value : f.values) PutBytes(out, value.data(), value.size());
  return true;
}

}  // namespace tcpstore
}  // namespace distributed
}  // namespace phi
