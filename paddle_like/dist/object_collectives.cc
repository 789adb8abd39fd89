// Byte-level collectives under the object collectives: sizes first (int64), then the bytes
// padded to the largest, on the group's CPU backend.
#include "paddle_like/dist/object_collectives.h"

#include <algorithm>

#include "phi/core/errors.h"

namespace paddle_like {
namespace dist {

const char* ByteReader::Take(size_t n, const char* what) {
  PADDLE_ENFORCE(n <= static_cast<size_t>(end_ - p_),
                 phi::errors::InvalidArgument(
                     "Malformed object bytes: %s needs %zu bytes, but %zu are left.", what, n,
                     static_cast<size_t>(end_ - p_)));
  const char* at = p_;
  p_ += n;
  return at;
}

void ThrowTrailingBytes(size_t size) {
  PADDLE_THROW(phi::errors::InvalidArgument(
      "Malformed object bytes: %zu bytes, but the object ended before their end.", size));
}

namespace detail {
namespace {

// Object traffic has a tag of its own, so it never matches a user's tensor send/recv.
constexpr int kObjectTag = 0x0b1ec7;

DenseTensor Int64s(std::vector<int64_t> v) { return DenseTensor::FromVector(v); }

DenseTensor Bytes(const std::string& blob, size_t padded) {
  DenseTensor t(phi::CPUPlace(), phi::DataType::UINT8,
                phi::DDim({static_cast<int64_t>(padded)}));
  std::fill_n(t.data<uint8_t>(), padded, 0);
  std::copy(blob.begin(), blob.end(), t.data<uint8_t>());
  return t;
}

std::string Blob(const DenseTensor& t, int64_t offset, int64_t size) {
  const char* p = reinterpret_cast<const char*>(t.data<uint8_t>()) + offset;
  return std::string(p, static_cast<size_t>(size));
}

GroupPtr Of(const GroupPtr& group) {
  GroupPtr g = group ? group : world();
  PADDLE_ENFORCE(g->is_member(), phi::errors::PreconditionNotMet(
                                     "Object collectives need a group this rank is in; it is "
                                     "not in '%s'.",
                                     g->name().c_str()));
  (void)g->backend_for("cpu");  // raises now when the group has no CPU backend
  return g;
}

std::vector<int64_t> AllSizes(int64_t mine, const GroupPtr& g) {
  DenseTensor sizes;
  all_gather_into_tensor(&sizes, Int64s({mine}), {g, false});
  return std::vector<int64_t>(sizes.data<int64_t>(), sizes.data<int64_t>() + g->size());
}

}  // namespace

void BroadcastBytes(std::string* blob, int src, const GroupPtr& group) {
  GroupPtr g = Of(group);
  DenseTensor size = Int64s({static_cast<int64_t>(blob->size())});
  broadcast(&size, src, {g, false});
  const int64_t n = size.data<int64_t>()[0];
  DenseTensor bytes = Bytes(get_rank() == src ? *blob : std::string(), static_cast<size_t>(n));
  if (n > 0) broadcast(&bytes, src, {g, false});
  *blob = Blob(bytes, 0, n);
}

std::vector<std::string> AllGatherBytes(const std::string& mine, const GroupPtr& group) {
  GroupPtr g = Of(group);
  auto sizes = AllSizes(static_cast<int64_t>(mine.size()), g);
  const int64_t most = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::string> out;
  if (most == 0) return std::vector<std::string>(sizes.size());
  DenseTensor all;
  all_gather_into_tensor(&all, Bytes(mine, static_cast<size_t>(most)), {g, false});
  for (size_t r = 0; r < sizes.size(); ++r) out.push_back(Blob(all, r * most, sizes[r]));
  return out;
}

std::vector<std::string> GatherBytes(const std::string& mine, int dst, const GroupPtr& group) {
  // Sizes are all-gathered (small), so the padded gather needs no second size round.
  auto blobs = AllGatherBytes(mine, group);
  if (get_rank() != dst) return {};
  return blobs;
}

std::string ScatterBytes(const std::vector<std::string>& blobs, int src, const GroupPtr& group) {
  GroupPtr g = Of(group);
  const bool root = get_rank() == src;
  PADDLE_ENFORCE(!root || static_cast<int>(blobs.size()) == g->size(),
                 phi::errors::InvalidArgument(
                     "scatter_object_list: the list needs one object per rank of the group "
                     "(%d), but has %zu.",
                     g->size(), blobs.size()));
  std::vector<int64_t> sizes(static_cast<size_t>(g->size()), 0);
  if (root) {
    for (size_t r = 0; r < blobs.size(); ++r) sizes[r] = static_cast<int64_t>(blobs[r].size());
  }
  DenseTensor size_tensor = Int64s(sizes);
  broadcast(&size_tensor, src, {g, false});
  std::copy(size_tensor.data<int64_t>(), size_tensor.data<int64_t>() + g->size(), sizes.begin());
  const int64_t most = *std::max_element(sizes.begin(), sizes.end());
  if (most == 0) return std::string();
  std::vector<DenseTensor> parts;
  if (root) {
    for (const auto& b : blobs) parts.push_back(Bytes(b, static_cast<size_t>(most)));
  }
  DenseTensor mine = Bytes(std::string(), static_cast<size_t>(most));
  scatter(&mine, parts, src, {g, false});
  return Blob(mine, 0, sizes[static_cast<size_t>(g->rank())]);
}

void SendBytes(const std::string& blob, int dst, const GroupPtr& group) {
  GroupPtr g = Of(group);
  send(Int64s({static_cast<int64_t>(blob.size())}), dst, {g, kObjectTag});
  if (!blob.empty()) send(Bytes(blob, blob.size()), dst, {g, kObjectTag});
}

std::string RecvBytes(int src, const GroupPtr& group) {
  GroupPtr g = Of(group);
  DenseTensor size = Int64s({-1});
  recv(&size, src, {g, kObjectTag});
  const int64_t n = size.data<int64_t>()[0];
  PADDLE_ENFORCE(n >= 0, phi::errors::InvalidArgument(
                             "recv_object_list: rank %d sent a negative size %lld.", src,
                             static_cast<long long>(n)));
  if (n == 0) return std::string();
  DenseTensor bytes = Bytes(std::string(), static_cast<size_t>(n));
  recv(&bytes, src, {g, kObjectTag});
  return Blob(bytes, 0, n);
}

}  // namespace detail
}  // namespace dist
}  // namespace paddle_like
