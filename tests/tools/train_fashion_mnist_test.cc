// The main job's trainer as a user runs it: under launch on real ranks, on the real dataset,
// and its errors for a missing or corrupt dataset.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#if defined(LAUNCH_BIN) && defined(TRAIN_FASHION_MNIST_BIN)
const char* kDataset = "/usr/share/datasets/fashion-mnist";

bool HaveDataset() {
  return std::ifstream(std::string(kDataset) + "/train-images-idx3-ubyte.gz").good();
}

TEST(TrainFashionMnist, TrainsAndMatchesOneProcessOnOneToThreeRanks) {
  if (!HaveDataset()) GTEST_SKIP() << "no " << kDataset << " (Debian: dataset-fashion-mnist)";
  for (int n = 1; n <= 3; ++n) {
    auto r = RunProc({LAUNCH_BIN, "--nproc_per_node", std::to_string(n), "--",
                      TRAIN_FASHION_MNIST_BIN, "--epochs", "1", "--max_steps", "60",
                      "--log_every", "20", "--hidden", "64", "--verify_steps", "5"},
                     std::chrono::seconds(120));
    EXPECT_EQ(r.exit_code(), 0) << n << " ranks\n" << r.output;
    EXPECT_NE(r.output.find("epoch 1/1 step    60/60"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("test accuracy: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("check: " + std::to_string(n) + " ranks vs 1 process, float64, 5 "
                            "steps"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find(") OK"), std::string::npos) << r.output;
  }
}

// The last "test accuracy: X%" line of a run, in percent (-1 when there is none).
double FinalAccuracy(const std::string& output) {
  size_t at = output.rfind("test accuracy: ");
  return at == std::string::npos ? -1 : std::stod(output.substr(at + 15));
}

TEST(TrainFashionMnist, ElasticRunLosesARankAndFinishesWithinAPointOfAnUninterruptedRun) {
  if (!HaveDataset()) GTEST_SKIP() << "no " << kDataset << " (Debian: dataset-fashion-mnist)";
  std::vector<std::string> args = {LAUNCH_BIN, "--elastic", "--nproc_per_node", "4", "--",
                                   TRAIN_FASHION_MNIST_BIN, "--epochs", "1", "--max_steps",
                                   "120", "--hidden", "64", "--verify_steps", "0", "--elastic"};
  auto plain = RunProc(args, std::chrono::seconds(120));
  ASSERT_EQ(plain.exit_code(), 0) << plain.output;
  args.insert(args.end(), {"--kill_rank", "2", "--kill_step", "60"});
  auto killed = RunProc(args, std::chrono::seconds(120));
  EXPECT_EQ(killed.exit_code(), 0) << killed.output;
  EXPECT_NE(killed.output.find("launch: rank 2 was killed by signal 9 (SIGKILL); elastic"),
            std::string::npos)
      << killed.output;
  EXPECT_NE(killed.output.find("elastic: rank 2 died at step 60; continuing on 3 ranks"),
            std::string::npos)
      << killed.output;
  double a = FinalAccuracy(plain.output), b = FinalAccuracy(killed.output);
  EXPECT_GT(a, 50) << plain.output;
  EXPECT_NEAR(a, b, 1.0) << killed.output;
}

TEST(TrainFashionMnist, MissingAndCorruptDatasetsAreClearErrors) {
  TempDir dir;
  auto run = [&] {
    return RunProc({LAUNCH_BIN, "--nproc_per_node", "2", "--", TRAIN_FASHION_MNIST_BIN,
                    "--data_dir", dir.path(), "--verify_steps", "0"},
                   std::chrono::seconds(60));
  };
  auto missing = run();
  EXPECT_NE(missing.exit_code(), 0);
  EXPECT_NE(missing.output.find("cannot open " + dir.path() + "/train-images-idx3-ubyte.gz"),
            std::string::npos)
      << missing.output;
  EXPECT_NE(missing.output.find("dataset-fashion-mnist"), std::string::npos) << missing.output;

  // A gzip file whose IDX magic is wrong, and one that is not gzip at all.
  std::string images = dir.path() + "/train-images-idx3-ubyte";
  {
    std::ofstream f(images, std::ios::binary);
    const unsigned char header[] = {0, 0, 8, 1, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  ASSERT_EQ(std::system(("gzip -f " + images).c_str()), 0);
  {
    std::ofstream f(dir.path() + "/train-labels-idx1-ubyte.gz", std::ios::binary);
    f << "plain text, not gzip";
  }
  auto corrupt = run();
  EXPECT_NE(corrupt.exit_code(), 0);
  EXPECT_NE(corrupt.output.find("corrupt IDX header: magic 0x00000801, expected 0x00000803"),
            std::string::npos)
      << corrupt.output;
  EXPECT_EQ(corrupt.output.find("signal"), std::string::npos) << corrupt.output;
}
#endif

}  // namespace
}  // namespace testing
}  // namespace paddle_like
