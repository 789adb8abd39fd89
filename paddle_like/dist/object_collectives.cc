// Byte-level collectives under the object collectives: sizes first (int64), then the bytes
// padded to the largest, on the group's CPU backend.
#include "paddle_like/dist/object_collectives.h"

#include <algorithm>

#include "paddle_like/dist/dist_internal.h"
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

// Where a group's object traffic runs: its CPU backend, or, on a group with only a device
// backend (NCCL), that backend's device: the bytes are staged through device memory, as the
// seed stages them through CUDA tensors.
struct Route {
  GroupPtr group;
  phi::Place place;

  DenseTensor Stage(DenseTensor host) const {
    if (place.is_cpu()) return host;
    DenseTensor dev;
    phi::Copy(host, place, &dev);
    return dev;
  }
  DenseTensor Host(const DenseTensor& t) const {
    if (t.place().is_cpu()) return t;
    DenseTensor host;
    phi::Copy(t, phi::CPUPlace(), &host);
    return host;
  }
  DenseTensor Int64s(std::vector<int64_t> v) const {
    return Stage(DenseTensor::FromVector(v));
  }
  DenseTensor Bytes(const std::string& blob, size_t padded) const {
    DenseTensor t(phi::CPUPlace(), phi::DataType::UINT8,
                  phi::DDim({static_cast<int64_t>(padded)}));
    std::fill_n(t.data<uint8_t>(), padded, 0);
    std::copy(blob.begin(), blob.end(), t.data<uint8_t>());
    return Stage(std::move(t));
  }
  std::vector<int64_t> ReadInt64s(const DenseTensor& t) const {
    DenseTensor h = Host(t);
    return std::vector<int64_t>(h.data<int64_t>(), h.data<int64_t>() + h.numel());
  }
  std::string Blob(const DenseTensor& t, int64_t offset, int64_t size) const {
    DenseTensor h = Host(t);
    const char* p = reinterpret_cast<const char*>(h.data<uint8_t>()) + offset;
    return std::string(p, static_cast<size_t>(size));
  }
};

Route RouteOf(const GroupPtr& group) {
  GroupPtr g = group ? group : world();
  PADDLE_ENFORCE(g->is_member(), phi::errors::PreconditionNotMet(
                                     "Object collectives need a group this rank is in; it is "
                                     "not in '%s'.",
                                     g->name().c_str()));
  const auto& by_device = g->backend_by_device();
  if (by_device.count("cpu") || !by_device.count("cuda")) {
    (void)g->backend_for("cpu");  // raises now when the group has no usable backend
    return {g, phi::CPUPlace()};
  }
  return {g, g->backend_for("cuda")->DefaultPlace()};
}

std::vector<int64_t> AllSizes(int64_t mine, const Route& r) {
  DenseTensor sizes;
  all_gather_into_tensor(&sizes, r.Int64s({mine}), {r.group, false});
  return r.ReadInt64s(sizes);
}

}  // namespace

bool IsRoot(RankArg root, const GroupPtr& group, const char* what) {
  GroupPtr g = group ? group : world();
  return g->is_member() && GroupRankOf(g, root, what) == g->rank();
}

void BroadcastBytes(std::string* blob, RankArg src, const GroupPtr& group) {
  Route r = RouteOf(group);
  const int root = GroupRankOf(r.group, src, "broadcast_object_list src");
  DenseTensor size = r.Int64s({static_cast<int64_t>(blob->size())});
  broadcast(&size, GroupRank{root}, {r.group, false});
  const int64_t n = r.ReadInt64s(size)[0];
  DenseTensor bytes =
      r.Bytes(r.group->rank() == root ? *blob : std::string(), static_cast<size_t>(n));
  if (n > 0) broadcast(&bytes, GroupRank{root}, {r.group, false});
  *blob = r.Blob(bytes, 0, n);
}

std::vector<std::string> AllGatherBytes(const std::string& mine, const GroupPtr& group) {
  Route r = RouteOf(group);
  auto sizes = AllSizes(static_cast<int64_t>(mine.size()), r);
  const int64_t most = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::string> out;
  if (most == 0) return std::vector<std::string>(sizes.size());
  DenseTensor all;
  all_gather_into_tensor(&all, r.Bytes(mine, static_cast<size_t>(most)), {r.group, false});
  DenseTensor host = r.Host(all);
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back(r.Blob(host, i * most, sizes[i]));
  return out;
}

std::vector<std::string> GatherBytes(const std::string& mine, RankArg dst,
                                     const GroupPtr& group) {
  const bool root = IsRoot(dst, group, "gather_object dst");
  // Sizes are all-gathered (small), so the padded gather needs no second size round.
  auto blobs = AllGatherBytes(mine, group);
  if (!root) return {};
  return blobs;
}

std::string ScatterBytes(const std::vector<std::string>& blobs, RankArg src,
                         const GroupPtr& group) {
  Route r = RouteOf(group);
  const int root_rank = GroupRankOf(r.group, src, "scatter_object_list src");
  const bool root = r.group->rank() == root_rank;
  PADDLE_ENFORCE(!root || static_cast<int>(blobs.size()) == r.group->size(),
                 phi::errors::InvalidArgument(
                     "scatter_object_list: the list needs one object per rank of the group "
                     "(%d), but has %zu.",
                     r.group->size(), blobs.size()));
  std::vector<int64_t> sizes(static_cast<size_t>(r.group->size()), 0);
  if (root) {
    for (size_t i = 0; i < blobs.size(); ++i) sizes[i] = static_cast<int64_t>(blobs[i].size());
  }
  DenseTensor size_tensor = r.Int64s(sizes);
  broadcast(&size_tensor, GroupRank{root_rank}, {r.group, false});
  sizes = r.ReadInt64s(size_tensor);
  const int64_t most = *std::max_element(sizes.begin(), sizes.end());
  if (most == 0) return std::string();
  std::vector<DenseTensor> parts;
  if (root) {
    for (const auto& b : blobs) parts.push_back(r.Bytes(b, static_cast<size_t>(most)));
  }
  DenseTensor mine = r.Bytes(std::string(), static_cast<size_t>(most));
  scatter(&mine, parts, GroupRank{root_rank}, {r.group, false});
  return r.Blob(mine, 0, sizes[static_cast<size_t>(r.group->rank())]);
}

void SendBytes(const std::string& blob, RankArg dst, const GroupPtr& group) {
  Route r = RouteOf(group);
  send(r.Int64s({static_cast<int64_t>(blob.size())}), dst, {r.group, kObjectTag});
  if (!blob.empty()) send(r.Bytes(blob, blob.size()), dst, {r.group, kObjectTag});
}

std::string RecvBytes(RankArg src, const GroupPtr& group) {
  Route r = RouteOf(group);
  DenseTensor size = r.Int64s({-1});
  const int sender = recv(&size, src, {r.group, kObjectTag});
  const int64_t n = r.ReadInt64s(size)[0];
  PADDLE_ENFORCE(n >= 0, phi::errors::InvalidArgument(
                             "recv_object_list: rank %d sent a negative size %lld.", sender,
                             static_cast<long long>(n)));
  if (n == 0) return std::string();
  DenseTensor bytes = r.Bytes(std::string(), static_cast<size_t>(n));
  recv(&bytes, sender, {r.group, kObjectTag});
  return r.Blob(bytes, 0, n);
}

}  // namespace detail
}  // namespace dist
}  // namespace paddle_like
