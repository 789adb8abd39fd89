// The point-to-point transport's wire (phi/core/distributed/p2p_transport_internal.h) as a
// hostile or broken peer would use it: real processes, real sockets, the real TCPStore. Its
// results on every world size, dtype and pattern are in gloo_collectives_test.cc, its faults in
// gloo_fault_matrix_test.cc, the lent payloads in shm_transport_test.cc.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <thread>

#include "distributed/process_group_gloo.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;

// What a rank of group 0 published for its point-to-point endpoint.
struct Published {
  std::string host;
  unsigned port = 0;
  uint64_t nonce = 0;
};

// Reads rank `rank`'s "host port nonce".
bool PublishedAddress(const RankContext& ctx, int rank, Published* out) {
  const std::vector<uint8_t> value = ctx.store->get("gloo/0/p2p/" + std::to_string(rank));
  std::istringstream in(std::string(value.begin(), value.end()));
  return static_cast<bool>(in >> out->host >> out->port >> out->nonce);
}

// An impostor's connection to the endpoint `to`, greeted as rank 0 with that endpoint's nonce
// and the hello `magic`; for the shared-memory hello, `channel` is the segment name that
// follows it (in its 64-byte field). The descriptor, or -1 with `*error` set.
int ConnectAsRank0(const Published& to, uint32_t magic, const char* channel, std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const int fd = phi::distributed::tcputils::ConnectOnce(to.host, static_cast<uint16_t>(to.port),
                                                         deadline, error);
  if (fd < 0) return -1;
  uint8_t hello[16 + 64] = {};
  const int32_t me = 0;
  std::memcpy(hello, &magic, 4);
  std::memcpy(hello + 4, &me, 4);
  std::memcpy(hello + 8, &to.nonce, 8);
  size_t bytes = 16;
  if (channel != nullptr) {
    std::memcpy(hello + 16, channel, std::strlen(channel));
    bytes = sizeof(hello);
  }
  if (!phi::distributed::tcputils::SendAll(fd, hello, bytes, deadline, error)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Malformed bytes on a point-to-point connection: an impostor greets rank 1 as rank 0 (with
// the nonce rank 1 published) and then sends a header that is not one: a bad magic while a
// receive from rank 0 is pending, which fails with UnavailableError naming rank 0 and what was
// wrong; then, on a second connection, a count of 2^50 elements before any receive, after
// which a receive from rank 0 fails with that cause. Nothing aborts, and rank 1's other peers
// are unaffected (its receive from rank 2 completes).
TEST(P2PTransport, MalformedBytesAreATypedErrorNotACrash) {
  RunRanks(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    DenseTensor warm = DenseTensor::FromVector<int32_t>({1});
    pg.AllReduce(&warm, warm, {}, true);  // every communicator and endpoint exists
    if (ctx.rank == 0) {
      Published rank1;
      ASSERT_TRUE(PublishedAddress(ctx, 1, &rank1)) << "the published address";
      for (int round = 0; round < 2; ++round) {
        if (round == 0) ctx.store->wait({"posted/0"}, std::chrono::seconds(20));
        std::string error;
        const int fd = ConnectAsRank0(rank1, 0x48324c50, nullptr, &error);  // "PL2H"
        ASSERT_GE(fd, 0) << error;
        uint8_t frame[48] = {};
        const uint32_t magic = round == 0 ? 0xdeadbeef : 0x46324c50, kind = 1;  // kEager
        const int32_t tag = 0, dtype = static_cast<int32_t>(DataType::FLOAT32);
        const int64_t count = round == 0 ? 4 : int64_t{1} << 50;
        std::memcpy(frame, &magic, 4);
        std::memcpy(frame + 4, &kind, 4);
        std::memcpy(frame + 8, &tag, 4);
        std::memcpy(frame + 12, &dtype, 4);
        std::memcpy(frame + 16, &count, 8);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        ASSERT_TRUE(phi::distributed::tcputils::SendAll(fd, frame, sizeof(frame), deadline,
                                                        &error)) << error;
        if (round == 1) ctx.store->set("sent/1", "1");
        ctx.store->wait({"failed/" + std::to_string(round)}, std::chrono::seconds(20));
        ::close(fd);
      }
      return;
    }
    if (ctx.rank == 2) {
      ctx.store->wait({"failed/1"}, std::chrono::seconds(30));
      DenseTensor t = DenseTensor::FromVector<int32_t>({7});
      pg.Send(t, 1, true);
      return;
    }
    for (int round = 0; round < 2; ++round) {
      DenseTensor t(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({4}));
      if (round == 1) {  // the bytes first: the break is seen before the receive is posted
        ctx.store->wait({"sent/1"}, std::chrono::seconds(20));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      auto task = pg.Recv(&t, 0, false);
      if (round == 0) ctx.store->set("posted/0", "1");
      try {
        task->Wait();
        ADD_FAILURE() << "a receive completed from malformed bytes";
      } catch (const phi::UnavailableError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("malformed point-to-point message from rank 0"), std::string::npos)
            << msg;
        const std::string dtype = std::to_string(static_cast<int>(DataType::FLOAT32));
        EXPECT_NE(msg.find(round == 0 ? "magic 3735928559, kind 1, dtype " + dtype + ", count 4"
                                      : "magic 1177701456, kind 1, dtype " + dtype +
                                            ", count 1125899906842624"),
                  std::string::npos)
            << msg;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong error type: " << e.what();
      }
      ctx.store->set("failed/" + std::to_string(round), "1");
    }
    DenseTensor from2(phi::CPUPlace(), DataType::INT32, phi::DDim({1}));
    pg.Recv(&from2, 2, true);
    EXPECT_EQ(from2.data<int32_t>()[0], 7);
  });
}

// A hello that names a shared-memory channel the listener must not or cannot map (a path
// outside the runtime's segments, a name of ours that does not exist) closes that connection
// with a warning and nothing else: no crash, no file touched, and the listener's traffic from
// its real peers goes on.
TEST(P2PTransport, AHelloNamingABadChannelClosesOnlyThatConnection) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    DenseTensor warm = DenseTensor::FromVector<int32_t>({1});
    pg.AllReduce(&warm, warm, {}, true);  // every communicator and endpoint exists
    if (ctx.rank == 0) {
      Published rank1;
      ASSERT_TRUE(PublishedAddress(ctx, 1, &rank1)) << "the published address";
      for (const char* name : {"/../../etc/passwd", "/paddle_like_shm_1_0000000000000000"}) {
        std::string error;
        // "PL2S": the shared-memory hello, a channel's name follows.
        const int fd = ConnectAsRank0(rank1, 0x53324c50, name, &error);
        ASSERT_GE(fd, 0) << error;
        pollfd pfd{fd, POLLIN, 0};
        ASSERT_EQ(::poll(&pfd, 1, 10000), 1) << name << ": the listener did not close it";
        uint8_t byte;
        EXPECT_LE(::recv(fd, &byte, 1, MSG_DONTWAIT), 0) << name << ": the end, not bytes";
        ::close(fd);
      }
      DenseTensor t = DenseTensor::FromVector<int32_t>({42});
      pg.Send(t, 1, true);  // the real connection, through a real channel
      return;
    }
    DenseTensor got(phi::CPUPlace(), DataType::INT32, phi::DDim({1}));
    pg.Recv(&got, 0, true);
    EXPECT_EQ(got.data<int32_t>()[0], 42);
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
