// The wire parser and the auth primitives as pure functions.
#include <gtest/gtest.h>

#include "phi/core/distributed/store/store_auth.h"
#include "phi/core/distributed/store/tcp_store_protocol.h"

namespace phi {
namespace distributed {
namespace tcpstore {
namespace {

Frame Sample() {
  Frame f;
  f.type = static_cast<uint8_t>(Command::kMultiSet);
  f.integer = -42;
  f.keys = {"a", "", std::string(100, 'k')};
  f.values = {{1, 2}, {}, std::vector<uint8_t>(1000, 0)};
  return f;
}

TEST(TCPStoreProtocolTest, RoundTripAndEveryPrefixIsIncomplete) {
  std::vector<uint8_t> bytes;
  std::string err;
  ASSERT_TRUE(EncodeFrame(Sample(), &bytes, &err)) << err;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    Frame f;
    size_t used = 99;
    ASSERT_EQ(ParseFrame(bytes.data(), cut, &f, &used, &err), ParseStatus::kIncomplete) << cut;
    ASSERT_EQ(used, 0u);
  }
  // Two frames back to back parse one at a time.
  bytes.insert(bytes.end(), bytes.begin(), bytes.end());
  Frame f;
  size_t used = 0;
  ASSERT_EQ(ParseFrame(bytes.data(), bytes.size(), &f, &used, &err), ParseStatus::kOk);
  EXPECT_EQ(f, Sample());
  EXPECT_EQ(used * 2, bytes.size());
  EXPECT_TRUE(ValidateRequest(f, &err)) << err;
}

TEST(TCPStoreProtocolTest, OversizedHeaderIsRejectedBeforeBuffering) {
  std::vector<uint8_t> header = {1, 0xff, 0xff, 0xff, 0xff};
  Frame f;
  size_t used = 0;
  std::string err;
  EXPECT_EQ(ParseFrame(header.data(), header.size(), &f, &used, &err), ParseStatus::kMalformed);
  EXPECT_NE(err.find("exceeds"), std::string::npos) << err;
}

TEST(TCPStoreProtocolTest, LyingLengthsAndLimitsAreMalformed) {
  std::string err;
  std::vector<uint8_t> bytes;
  Frame big;
  big.type = 1;
  big.keys = {std::string(kMaxKeyBytes + 1, 'k')};
  EXPECT_FALSE(EncodeFrame(big, &bytes, &err));
  // Hand-made: one key announcing 1 GiB inside a 16-byte payload.
  bytes = {1, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x40, 0};
  Frame f;
  size_t used = 0;
  EXPECT_EQ(ParseFrame(bytes.data(), bytes.size(), &f, &used, &err), ParseStatus::kMalformed);
  // Key count larger than the payload could hold.
  bytes = {6, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
  EXPECT_EQ(ParseFrame(bytes.data(), bytes.size(), &f, &used, &err), ParseStatus::kMalformed);
}

TEST(TCPStoreProtocolTest, ValidateChecksShapes) {
  std::string err;
  Frame f;
  f.type = static_cast<uint8_t>(Command::kSet);
  f.keys = {"k"};
  EXPECT_FALSE(ValidateRequest(f, &err));
  f.values = {{1}};
  EXPECT_TRUE(ValidateRequest(f, &err));
  f.type = static_cast<uint8_t>(Command::kGet);
  f.values.clear();
  f.integer = -1;
  EXPECT_FALSE(ValidateRequest(f, &err));
  f.type = 99;
  EXPECT_FALSE(ValidateRequest(f, &err));
  EXPECT_NE(err.find("unknown command"), std::string::npos);
}

std::string Hex(const std::vector<uint8_t>& v) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : v) s += std::string(1, d[b >> 4]) + d[b & 15];
  return s;
}

TEST(StoreAuthTest, Sha256AndHmacMatchPublishedVectors) {
  const std::string abc = "abc";
  EXPECT_EQ(Hex(Sha256(reinterpret_cast<const uint8_t*>(abc.data()), abc.size())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two =
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 56 bytes: two blocks
  EXPECT_EQ(Hex(Sha256(reinterpret_cast<const uint8_t*>(two.data()), two.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string msg = "what do ya want for nothing?";  // RFC 4231 test case 2
  EXPECT_EQ(Hex(HmacSha256("Jefe", std::vector<uint8_t>(msg.begin(), msg.end()))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(ConstantTimeEquals({1, 2}, {1, 2}));
  EXPECT_FALSE(ConstantTimeEquals({1, 2}, {1, 3}));
  EXPECT_NE(RandomBytes(32), RandomBytes(32));
}

}  // namespace
}  // namespace tcpstore
}  // namespace distributed
}  // namespace phi
