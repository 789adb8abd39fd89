// Object collectives with strings, a struct, vectors and a user type, on 1-4 real ranks;
// malformed bytes raise instead of reading past the end.
#include <gtest/gtest.h>

#include "paddle_like/dist/object_collectives.h"
#include "phi/core/errors.h"
#include "tests/harness/multiprocess.h"
#include "tests/paddle_like/dist_test_util.h"

namespace paddle_like {
namespace testing {

// A user type with its own serializer (not trivially copyable: it holds a string).
struct Sample {
  std::string name;
  std::vector<double> values;
  bool operator==(const Sample& o) const { return name == o.name && values == o.values; }
};

}  // namespace testing

template <>
struct dist::Serializer<testing::Sample> {
  static void Write(const testing::Sample& s, std::string* out) {
    Serializer<std::string>::Write(s.name, out);
    Serializer<std::vector<double>>::Write(s.values, out);
  }
  static testing::Sample Read(ByteReader* in) {
    testing::Sample s;
    s.name = Serializer<std::string>::Read(in);
    s.values = Serializer<std::vector<double>>::Read(in);
    return s;
  }
};

namespace testing {
namespace {

struct Point {
  int32_t x;
  double y;
};

Sample Make(int r) { return Sample{"rank" + std::string(r, '*'), std::vector<double>(r, r + 0.5)}; }

class DistObjects : public ::testing::TestWithParam<int> {};

TEST_P(DistObjects, EveryObjectCollective) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    dist::InitOptions o;
    o.backend = "gloo";
    o.timeout = std::chrono::seconds(20);
    dist::init_process_group(o);
    const int r = ctx.rank, n = ctx.world_size;

    std::vector<std::string> words;
    if (r == n - 1) words = {"alpha", "", std::string(100000, 'z')};
    dist::broadcast_object_list(&words, n - 1);
    ASSERT_EQ(words.size(), 3u);
    EXPECT_EQ(words[0], "alpha");
    EXPECT_EQ(words[1], "");
    EXPECT_EQ(words[2].size(), 100000u);

    std::vector<Sample> all;
    dist::all_gather_object(&all, Make(r));
    ASSERT_EQ(static_cast<int>(all.size()), n);
    for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], Make(q));

    std::vector<Point> points;
    dist::gather_object(Point{r, r * 1.5}, &points, 0);
    if (r == 0) {
      ASSERT_EQ(static_cast<int>(points.size()), n);
      for (int q = 0; q < n; ++q) EXPECT_EQ(points[q].x, q);
    } else {
      EXPECT_TRUE(points.empty());
    }

    std::vector<std::vector<int>> parts;
    if (r == 0) {
      for (int q = 0; q < n; ++q) parts.push_back(std::vector<int>(q, q));
    }
    std::vector<int> mine{-1};
    dist::scatter_object_list(&mine, parts, 0);
    EXPECT_EQ(mine, std::vector<int>(r, r));

    if (n > 1) {
      if (r == 0) {
        dist::send_object_list(std::vector<Sample>{Make(3), Make(0)}, 1);
      } else if (r == 1) {
        std::vector<Sample> got;
        dist::recv_object_list(&got, 0);
        ASSERT_EQ(got.size(), 2u);
        EXPECT_EQ(got[0], Make(3));
      }
    }
    dist::destroy_process_group();
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DistObjects, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "world" + std::to_string(i.param);
                         });

TEST(DistObjectBytes, MalformedBytesRaise) {
  std::string bytes = dist::ToBytes(std::vector<std::string>{"abc", "de"});
  EXPECT_EQ(dist::FromBytes<std::vector<std::string>>(bytes),
            (std::vector<std::string>{"abc", "de"}));
  EXPECT_THROW(dist::FromBytes<std::vector<std::string>>(bytes.substr(0, bytes.size() - 1)),
               phi::InvalidArgumentError);
  EXPECT_THROW(dist::FromBytes<std::vector<std::string>>(bytes + "x"), phi::InvalidArgumentError);
  std::string huge = dist::ToBytes(uint64_t{1} << 60);  // a claimed count with nothing after
  EXPECT_THROW(dist::FromBytes<std::string>(huge), phi::InvalidArgumentError);
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
