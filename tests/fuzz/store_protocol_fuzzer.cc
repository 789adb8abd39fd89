// libFuzzer target for the TCPStore wire parser (the code that reads untrusted bytes off
// the network). Run it with tools/fuzz_store.sh [seconds]; seeds in tests/fuzz/store_corpus.
//
// Beyond "no crash, no leak, no UB" (ASan+UBSan), it checks the parser's contract:
//  - the input is parsed as a stream, the way the server's per-connection buffer is;
//  - every accepted frame re-encodes and re-parses to the same frame;
//  - no proper prefix of an accepted frame parses as complete or malformed (so a frame
//    arriving in pieces is never misjudged before its last byte);
//  - a request passing ValidateRequest has exactly its command's shape.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "phi/core/distributed/store/tcp_store_protocol.h"

using namespace phi::distributed::tcpstore;  // NOLINT

#define FUZZ_CHECK(cond)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      __builtin_printf("FUZZ_CHECK failed: %s (line %d)\n", #cond, __LINE__); \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t off = 0;
  for (int frames = 0; frames < 64 && off < size; ++frames) {
    Frame f;
    size_t used = 0;
    std::string err;
    ParseStatus st = ParseFrame(data + off, size - off, &f, &used, &err);
    if (st == ParseStatus::kIncomplete) {
      FUZZ_CHECK(used == 0);
      break;
    }
    if (st == ParseStatus::kMalformed) {
      FUZZ_CHECK(!err.empty());
      break;
    }
    FUZZ_CHECK(used >= kHeaderBytes && used <= size - off);
    FUZZ_CHECK(f.keys.size() <= kMaxKeys && f.values.size() <= kMaxKeys);
    for (const auto& k : f.keys) FUZZ_CHECK(k.size() <= kMaxKeyBytes);

    // Prefixes: a few cut points, always including the header boundary and one short of
    // the end.
    const size_t cuts[] = {0, 1, kHeaderBytes - 1, kHeaderBytes, used / 2, used - 1};
    for (size_t cut : cuts) {
      if (cut >= used) continue;
      Frame g;
      size_t u2 = 0;
      FUZZ_CHECK(ParseFrame(data + off, cut, &g, &u2, &err) == ParseStatus::kIncomplete);
    }

    std::vector<uint8_t> again;
    FUZZ_CHECK(EncodeFrame(f, &again, &err));
    FUZZ_CHECK(again.size() == used);
    FUZZ_CHECK(std::memcmp(again.data(), data + off, used) == 0);
    Frame g;
    size_t u2 = 0;
    FUZZ_CHECK(ParseFrame(again.data(), again.size(), &g, &u2, &err) == ParseStatus::kOk);
    FUZZ_CHECK(u2 == used && g == f);

    if (ValidateRequest(f, &err)) {
      switch (static_cast<Command>(f.type)) {
        case Command::kSet:
        case Command::kAppend: FUZZ_CHECK(f.keys.size() == 1 && f.values.size() == 1); break;
        case Command::kCompareSet: FUZZ_CHECK(f.keys.size() == 1 && f.values.size() == 2); break;
        case Command::kMultiSet: FUZZ_CHECK(f.keys.size() == f.values.size()); break;
        case Command::kAuth: FUZZ_CHECK(f.values.size() == 1 && f.values[0].size() == kDigestBytes); break;
        case Command::kGet: FUZZ_CHECK(f.keys.size() == 1 && f.integer >= 0); break;
        default: break;
      }
    } else {
      FUZZ_CHECK(!err.empty());
    }
    off += used;
  }
  return 0;
}
