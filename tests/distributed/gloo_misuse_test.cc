// Bad calls raise a typed error naming what was expected, run nothing, and leave the group
// usable. A collective whose checks fail still tells the other ranks (a failure notice
// through the agreement check, which takes one sequence number), so they never hang.
#include <gtest/gtest.h>

#include "distributed/process_group_gloo.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;

// Runs `call`, expects error type E whose message contains `needle`, and that at most the
// failure notice was issued.
template <typename E, typename F>
void ExpectRejected(ProcessGroupGloo* pg, const char* what, const std::string& needle, F&& call) {
  uint64_t before = pg->seq();
  try {
    call();
    ADD_FAILURE() << what << ": no error raised";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << what << ": message lacks '" << needle << "': " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong error type: " << e.what();
  }
  EXPECT_LE(pg->seq(), before + 1) << what << ": more than a failure notice was issued";
}

TEST(GlooMisuse, EveryBadCallIsATypedErrorAndNothingIsIssued) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
    auto f32 = MakeInput(DataType::FLOAT32, 8, ctx.rank, ReduceOp::SUM);
    auto i32 = MakeInput(DataType::INT32, 8, ctx.rank, ReduceOp::SUM);

    // Mismatched dtypes and sizes.
    ExpectRejected<phi::InvalidArgumentError>(&pg, "dtype mismatch", "float32", [&] {
      DenseTensor out = MakeInput(DataType::INT32, 8, 0, ReduceOp::SUM);
      pg.AllReduce(&out, f32, {}, true);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "size mismatch", "must have 8 elements", [&] {
      DenseTensor out(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({7}));
      pg.AllReduce(&out, f32, {}, true);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "allgather output", "must have 16 elements", [&] {
      DenseTensor out(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({8}));
      pg.AllGather(&out, f32, true);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "reducescatter indivisible", "divisible", [&] {
      DenseTensor in(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({7})), out;
      pg.ReduceScatter(&out, in, {}, true);
    });
    ExpectRejected<phi::OutOfRangeError>(&pg, "partial range", "exceeds", [&] {
      DenseTensor out;
      pg.AllGather(&out, f32, 5, 4, true);
    });

    // Non-contiguous input (every other element).
    ExpectRejected<phi::InvalidArgumentError>(&pg, "non-contiguous", "contiguous", [&] {
      DenseTensor strided = f32.AsStrided(phi::DDim({4}), {2}, 0);
      DenseTensor out;
      pg.AllReduce(&out, strided, {}, true);
    });

    // Roots and peers out of range.
    ExpectRejected<phi::OutOfRangeError>(&pg, "broadcast root", "[0, 2)", [&] {
      DenseTensor out;
      pg.Broadcast(&out, f32, {5, 0}, true);
    });
    ExpectRejected<phi::OutOfRangeError>(&pg, "reduce root", "but it is -1", [&] {
      DenseTensor out;
      pg.Reduce(&out, f32, {ReduceOp::SUM, 1.0, -1}, true);
    });
    ExpectRejected<phi::OutOfRangeError>(&pg, "send peer", "send destination rank", [&] {
      pg.Send(f32, 2, true);
    });
    ExpectRejected<phi::OutOfRangeError>(&pg, "scatter root", "scatter root", [&] {
      DenseTensor out(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({4}));
      pg.Scatter(&out, f32, {3}, true);
    });

    // Wrong list lengths and splits.
    ExpectRejected<phi::InvalidArgumentError>(&pg, "gather list", "one output tensor per rank", [&] {
      std::vector<DenseTensor> outs(3);
      pg.Gather(&outs, f32, {ctx.rank}, true);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "alltoall list", "one input tensor per rank", [&] {
      std::vector<DenseTensor> ins{f32}, outs(2);
      pg.AllToAll(&outs, ins, true, false);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "alltoall splits", "one entry per rank", [&] {
      DenseTensor out(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({8}));
      pg.AllToAll(&out, f32, {8}, {4, 4}, true);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "alltoall split sum", "sum to 9", [&] {
      DenseTensor out(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({8}));
      pg.AllToAll(&out, f32, {4, 4}, {4, 5}, true);
    });

    // Unsupported op/dtype pairs.
    ExpectRejected<phi::InvalidArgumentError>(&pg, "BAND float", "integer and bool", [&] {
      DenseTensor out;
      pg.AllReduce(&out, f32, {ReduceOp::BAND, 1.0}, true);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "MIN complex", "complex", [&] {
      DenseTensor c = MakeInput(DataType::COMPLEX64, 4, 0, ReduceOp::SUM), out;
      pg.AllReduce(&out, c, {ReduceOp::MIN, 1.0}, true);
    });
    ExpectRejected<phi::InvalidArgumentError>(&pg, "AVG bool", "bool", [&] {
      DenseTensor b = MakeInput(DataType::BOOL, 4, 0, ReduceOp::SUM), out;
      pg.AllReduce(&out, b, {ReduceOp::AVG, 1.0}, true);
    });

    // Misused coalescing.
    ExpectRejected<phi::PreconditionNotMetError>(&pg, "end without start", "without StartCoalescing",
                                                 [&] { pg.EndCoalescing(); });

    // The group still works, with the same sequence on both ranks.
    DenseTensor out;
    pg.AllReduce(&out, i32, {}, true);
    std::vector<Val> ref(8);
    for (int64_t i = 0; i < 8; ++i) ref[i] = ReduceRef(DataType::INT32, ReduceOp::SUM, 2, i, 1.0);
    ExpectClose(out, ref, "allreduce after misuse");
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
