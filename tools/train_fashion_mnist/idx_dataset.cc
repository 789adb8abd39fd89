#include "tools/train_fashion_mnist/idx_dataset.h"

#include <zlib.h>

#include <memory>

#include "phi/core/errors.h"

namespace paddle_like {
namespace tools {

namespace {

// The whole decompressed content of a .gz file.
std::string ReadGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  PADDLE_ENFORCE(f != nullptr,
                 phi::errors::NotFound(
                     "cannot open %s. Fashion-MNIST comes from Debian's dataset-fashion-mnist "
                     "package (tools/install_deps.sh installs it), or pass --data_dir.",
                     path.c_str()));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  PADDLE_ENFORCE(n == 0 && (err == Z_OK || err == Z_STREAM_END),
                 phi::errors::InvalidArgument("%s is not a readable gzip file: %s.",
                                              path.c_str(), msg ? msg : "read error"));
  return out;
}

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Checks the IDX header (magic 0x0000 08 <ndims>, unsigned bytes) and returns the dims.
std::vector<int64_t> ParseHeader(const std::string& bytes, int ndims, const std::string& path) {
  size_t header = 4 + 4 * static_cast<size_t>(ndims);
  PADDLE_ENFORCE(bytes.size() >= header,
                 phi::errors::InvalidArgument(
                     "%s: corrupt IDX file: %zu bytes, shorter than its %zu-byte header.",
                     path.c_str(), bytes.size(), header));
  uint32_t magic = BigEndian32(bytes, 0);
  uint32_t expected = 0x00000800u | static_cast<uint32_t>(ndims);
  PADDLE_ENFORCE(magic == expected,
                 phi::errors::InvalidArgument(
                     "%s: corrupt IDX header: magic 0x%08x, expected 0x%08x (unsigned bytes, "
                     "%d dims).",
                     path.c_str(), magic, expected, ndims));
  std::vector<int64_t> dims;
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    dims.push_back(BigEndian32(bytes, 4 + 4 * i));
    total *= dims.back();
  }
  PADDLE_ENFORCE(bytes.size() == header + static_cast<size_t>(total),
                 phi::errors::InvalidArgument(
                     "%s: corrupt IDX file: the header promises %ld bytes of data, the file "
                     "has %zu.",
                     path.c_str(), long(total), bytes.size() - header));
  return dims;
}

}  // namespace

IdxDataset ReadIdxDataset(const std::string& dir, const std::string& prefix) {
  std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  std::string labels_path = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  std::string images = ReadGzip(images_path);
  std::string labels = ReadGzip(labels_path);
  auto idims = ParseHeader(images, 3, images_path);
  auto ldims = ParseHeader(labels, 1, labels_path);
  PADDLE_ENFORCE(idims[0] == ldims[0],
                 phi::errors::InvalidArgument("%s has %ld images but %s has %ld labels.",
                                              images_path.c_str(), long(idims[0]),
                                              labels_path.c_str(), long(ldims[0])));
  IdxDataset d;
  d.count = idims[0];
  d.rows = idims[1];
  d.cols = idims[2];
  d.images.assign(images.begin() + 16, images.end());
  d.labels.assign(labels.begin() + 8, labels.end());
  for (int64_t i = 0; i < d.count; ++i) {
    PADDLE_ENFORCE(d.labels[i] < 10,
                   phi::errors::InvalidArgument("%s: label %ld is %d, outside [0, 10).",
                                                labels_path.c_str(), long(i), d.labels[i]));
  }
  return d;
}

}  // namespace tools
}  // namespace paddle_like
