// One behavioural contract, checked against every Store kind (TCP, File, Hash, Prefix).
// Keys live under `ns` so several ranks can run it on one store at once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "phi/core/distributed/store/store.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace testing {

inline std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// exclusive: nobody else writes to the store meanwhile, so num_keys() deltas are exact.
inline void ExerciseStore(phi::distributed::Store& s, const std::string& ns, bool exclusive) {
  using std::chrono::milliseconds;
  const auto k = [&](const std::string& name) { return ns + "/" + name; };
  const int64_t keys0 = exclusive ? s.num_keys() : 0;

  // set / get, binary-safe, empty values, overwrite.
  std::vector<uint8_t> binary = {0, 1, 2, 255, 0, 7};
  s.set(k("bin"), binary);
  EXPECT_EQ(s.get(k("bin")), binary);
  s.set(k("empty"), std::vector<uint8_t>());
  EXPECT_TRUE(s.get(k("empty")).empty());
  s.set(k("str"), std::string("one"));
  s.set(k("str"), std::string("two"));
  EXPECT_EQ(s.get_string(k("str")), "two");
  if (exclusive) {
    EXPECT_EQ(s.num_keys(), keys0 + 3);
  }

  // add: creates at 0, returns the sum, stored as decimal text.
  EXPECT_EQ(s.add(k("ctr"), 5), 5);
  EXPECT_EQ(s.add(k("ctr"), -2), 3);
  EXPECT_EQ(s.add(k("ctr"), 0), 3);
  EXPECT_EQ(s.get_string(k("ctr")), "3");
  EXPECT_THROW(s.add(k("str"), 1), phi::EnforceNotMet);  // "two" is not an integer

  // compare_set: absent + empty expected sets; mismatch leaves it; match replaces.
  EXPECT_EQ(s.compare_set(k("cas"), {}, Bytes("a")), Bytes("a"));
  EXPECT_EQ(s.compare_set(k("cas"), Bytes("zzz"), Bytes("b")), Bytes("a"));
  EXPECT_EQ(s.get(k("cas")), Bytes("a"));
  EXPECT_EQ(s.compare_set(k("cas"), Bytes("a"), Bytes("b")), Bytes("b"));
  EXPECT_EQ(s.get(k("cas")), Bytes("b"));
  EXPECT_TRUE(s.compare_set(k("cas-absent"), Bytes("x"), Bytes("y")).empty());
  EXPECT_FALSE(s.check({k("cas-absent")}));

  // check / delete_key.
  EXPECT_TRUE(s.check({k("bin"), k("str")}));
  EXPECT_FALSE(s.check({k("bin"), k("nope")}));
  EXPECT_TRUE(s.delete_key(k("bin")));
  EXPECT_FALSE(s.delete_key(k("bin")));
  EXPECT_FALSE(s.check({k("bin")}));

  // append: creates, then concatenates.
  s.append(k("log"), Bytes("ab"));
  s.append(k("log"), Bytes("cd"));
  EXPECT_EQ(s.get_string(k("log")), "abcd");

  // multi_set / multi_get keep order.
  s.multi_set({k("m1"), k("m2"), k("m3")}, {Bytes("1"), Bytes(""), Bytes("333")});
  auto got = s.multi_get({k("m3"), k("m1"), k("m2")});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], Bytes("333"));
  EXPECT_EQ(got[1], Bytes("1"));
  EXPECT_TRUE(got[2].empty());

  // wait on present keys returns at once; on a missing key it times out naming it.
  s.wait({k("m1"), k("m2")}, milliseconds(1000));
  try {
    s.wait({k("m1"), k("never-set")}, milliseconds(100));
    ADD_FAILURE() << "wait on a missing key did not time out";
  } catch (const phi::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(k("never-set")), std::string::npos) << e.what();
  }
  // get honours the store's timeout.
  const auto saved = s.timeout();
  s.set_timeout(milliseconds(150));
  auto t0 = std::chrono::steady_clock::now();
  try {
    s.get(k("missing"));
    ADD_FAILURE() << "get on a missing key did not time out";
  } catch (const phi::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(k("missing")), std::string::npos) << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(140));
  EXPECT_THROW(s.multi_get({k("m1"), k("missing")}), phi::TimeoutError);
  s.set_timeout(saved);

  if (exclusive) {
    // bin deleted; str, empty, ctr, cas, log, m1..m3 remain.
    EXPECT_EQ(s.num_keys(), keys0 + 8);
  }
}

}  // namespace testing
}  // namespace paddle_like
