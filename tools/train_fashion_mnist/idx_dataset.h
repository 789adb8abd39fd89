// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed as Debian's
// dataset-fashion-mnist ships them, read with zlib.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace paddle_like {
namespace tools {

struct IdxDataset {
  int64_t count = 0;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> images;  // count x rows x cols pixels, row-major
  std::vector<uint8_t> labels;  // count labels in [0, 10)
  int64_t pixels() const { return rows * cols; }
};

// Reads <dir>/<prefix>-images-idx3-ubyte.gz and <dir>/<prefix>-labels-idx1-ubyte.gz
// (prefix "train" or "t10k"). Raises NotFound for a missing file (naming the Debian package)
// and InvalidArgument for a corrupt one: a wrong magic number, counts that differ between
// the two files, a label out of range, or a file shorter than its header says.
IdxDataset ReadIdxDataset(const std::string& dir, const std::string& prefix);

}  // namespace tools
}  // namespace paddle_like
