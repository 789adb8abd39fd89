// Wire format of the TCPStore, as pure functions (no sockets, no globals).
//
// The server's request parser is the part of the store that reads bytes from the network,
// so it lives here on its own: the server, the client and the libFuzzer target
// (tests/fuzz/store_protocol_fuzzer.cc) all use exactly this code.
//
// Every message, in either direction, is one frame:
//
//   u8  type          request: Command; response: Status
//   u32 payload_len   little endian, <= kMaxPayloadBytes
//   payload:
//     i64 integer      add delta / timeout in ms / result / flags
//     u32 num_keys     <= kMaxKeys
//     num_keys x (u32 len <= kMaxKeyBytes, bytes)
//     u32 num_values   <= kMaxKeys
//     num_values x (u32 len <= kMaxValueBytes, bytes)
//
// A frame whose header announces more than the limits is rejected as soon as the header is
// read, so a peer can never make the reader buffer more than one legal frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace phi {
namespace distributed {
namespace tcpstore {

constexpr size_t kHeaderBytes = 5;
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = 64u << 20;    // 64 MiB
constexpr size_t kMaxKeys = 16384;
constexpr size_t kMaxPayloadBytes = 128u << 20;  // 128 MiB
constexpr size_t kNonceBytes = 32;
constexpr size_t kDigestBytes = 32;
// Identifies the protocol in the server's hello; a mismatch is reported, never guessed at.
constexpr const char* kProtocolName = "paddle_like.tcpstore.v1";

enum class Command : uint8_t {
  kSet = 1,         // keys[0] = values[0]
  kGet = 2,         // waits up to integer ms for keys[0]
  kAdd = 3,         // keys[0] += integer
  kCompareSet = 4,  // keys[0]: values[0] expected, values[1] desired
  kWait = 5,        // waits up to integer ms for all keys
  kCheck = 6,       // all keys exist?
  kDeleteKey = 7,   // keys[0]
  kNumKeys = 8,
  kAppend = 9,      // keys[0] += values[0]
  kMultiGet = 10,   // waits up to integer ms for all keys, returns their values
  kMultiSet = 11,   // keys[i] = values[i]
  kAuth = 12,       // values[0] = HMAC-SHA256(token, nonce)
  kPing = 13,
  kSetOnClose = 14,  // keys[0] = values[0] when this connection closes; values empty: cancel
};

enum class Status : uint8_t {
  kOk = 0,       // integer / values carry the result
  kTimeout = 1,  // keys = the keys still missing
  kError = 2,    // values[0] = message
  kHello = 3,    // first frame from the server: keys[0] = kProtocolName,
                 // integer = 1 when auth is required, values[0] = nonce
};

struct Frame {
  uint8_t type = 0;
  int64_t integer = 0;
  std::vector<std::string> keys;
  std::vector<std::vector<uint8_t>> values;

  bool operator==(const Frame& o) const {
    return type == o.type && integer == o.integer && keys == o.keys && values == o.values;
  }
};

enum class ParseStatus {
  kOk,          // one frame parsed, *consumed bytes used
  kIncomplete,  // need more bytes; nothing consumed
  kMalformed,   // the stream can never become valid; *error says why
};

// Parses one frame from the front of [data, data+size). Never reads past size, never
// allocates more than the frame's (limit-checked) contents.
ParseStatus ParseFrame(const uint8_t* data, size_t size, Frame* frame, size_t* consumed,
                       std::string* error);

// Checks that a parsed frame is a request of a known command with the shape that command
// needs (e.g. kSet: one key, one value). Returns false with *error set otherwise.
bool ValidateRequest(const Frame& frame, std::string* error);

// Serializes a frame. Returns false (with *error) when the frame breaks a limit, so a server
// never sends what its peer would reject.
bool EncodeFrame(const Frame& frame, std::vector<uint8_t>* out, std::string* error);

const char* CommandName(uint8_t type);

}  // namespace tcpstore
}  // namespace distributed
}  // namespace phi
