// Object collectives of paddle_like::dist: C++ values travel as bytes through a Serializer
// trait. Provided for std::string, trivially copyable types and std::vector of any
// serializable type; a user type adds its own specialization:
//
//   template <> struct paddle_like::dist::Serializer<MyType> {
//     static void Write(const MyType& v, std::string* out);
//     static MyType Read(ByteReader* in);
//   };
//
// Sizes travel first, then the bytes, on the group's CPU backend; a group with only a device
// backend (plain "nccl") stages them through its device's memory, as the seed does.
// Malformed bytes raise InvalidArgument naming what was short.
#pragma once

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "paddle_like/dist/distributed.h"

namespace paddle_like {
namespace dist {

// Reads serialized bytes; every read is checked against the end.
class ByteReader {
 public:
  ByteReader(const char* data, size_t size) : p_(data), end_(data + size) {}
  // The next n bytes; InvalidArgument when fewer are left.
  const char* Take(size_t n, const char* what);
  bool done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

[[noreturn]] void ThrowTrailingBytes(size_t size);

template <typename T, typename Enable = void>
struct Serializer;  // no default: an unsupported type fails to compile, naming it

template <typename T>
struct Serializer<T, std::enable_if_t<std::is_trivially_copyable<T>::value>> {
  static void Write(const T& v, std::string* out) {
    out->append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  static T Read(ByteReader* in) {
    T v;
    std::memcpy(&v, in->Take(sizeof(T), "a trivially copyable value"), sizeof(T));
    return v;
  }
};

template <>
struct Serializer<std::string> {
  static void Write(const std::string& v, std::string* out) {
    Serializer<uint64_t>::Write(v.size(), out);
    out->append(v);
  }
  static std::string Read(ByteReader* in) {
    const uint64_t n = Serializer<uint64_t>::Read(in);
    return std::string(in->Take(n, "a string's characters"), n);
  }
};

template <typename T>
struct Serializer<std::vector<T>, void> {
  static void Write(const std::vector<T>& v, std::string* out) {
    Serializer<uint64_t>::Write(v.size(), out);
    for (const T& x : v) Serializer<T>::Write(x, out);
  }
  static std::vector<T> Read(ByteReader* in) {
    const uint64_t n = Serializer<uint64_t>::Read(in);
    std::vector<T> v;
    for (uint64_t i = 0; i < n; ++i) v.push_back(Serializer<T>::Read(in));
    return v;
  }
};

template <typename T>
std::string ToBytes(const T& v) {
  std::string out;
  Serializer<T>::Write(v, &out);
  return out;
}
template <typename T>
T FromBytes(const std::string& bytes) {
  ByteReader in(bytes.data(), bytes.size());
  T v = Serializer<T>::Read(&in);
  if (!in.done()) ThrowTrailingBytes(bytes.size());
  return v;
}

// Byte-level collectives the templates use (object_collectives.cc). `src`/`dst`: a global
// rank or a GroupRank (distributed.h).
namespace detail {
// Whether this rank is `root` of `group` (null: the world).
bool IsRoot(RankArg root, const GroupPtr& group, const char* what);
void BroadcastBytes(std::string* blob, RankArg src, const GroupPtr& group);
std::vector<std::string> AllGatherBytes(const std::string& mine, const GroupPtr& group);
// Every rank's blob on dst; empty elsewhere.
std::vector<std::string> GatherBytes(const std::string& mine, RankArg dst,
                                     const GroupPtr& group);
std::string ScatterBytes(const std::vector<std::string>& blobs, RankArg src,
                         const GroupPtr& group);
void SendBytes(const std::string& blob, RankArg dst, const GroupPtr& group);
std::string RecvBytes(RankArg src, const GroupPtr& group);
}  // namespace detail

// src's objects replace every other rank's (the list is resized).
template <typename T>
void broadcast_object_list(std::vector<T>* objects, RankArg src,
                           const GroupPtr& group = nullptr) {
  std::string blob =
      detail::IsRoot(src, group, "broadcast_object_list src") ? ToBytes(*objects) : std::string();
  detail::BroadcastBytes(&blob, src, group);
  *objects = FromBytes<std::vector<T>>(blob);
}
// Every rank's object, in group-rank order.
template <typename T>
void all_gather_object(std::vector<T>* out, const T& obj, const GroupPtr& group = nullptr) {
  out->clear();
  for (const auto& blob : detail::AllGatherBytes(ToBytes(obj), group)) {
    out->push_back(FromBytes<T>(blob));
  }
}
template <typename T>
void gather_object(const T& obj, std::vector<T>* out, RankArg dst,
                   const GroupPtr& group = nullptr) {
  auto blobs = detail::GatherBytes(ToBytes(obj), dst, group);
  if (!detail::IsRoot(dst, group, "gather_object dst")) return;
  out->clear();
  for (const auto& blob : blobs) out->push_back(FromBytes<T>(blob));
}
// out gets in[group rank] from src; `in` is used on src only.
template <typename T>
void scatter_object_list(T* out, const std::vector<T>& in, RankArg src,
                         const GroupPtr& group = nullptr) {
  std::vector<std::string> blobs;
  if (detail::IsRoot(src, group, "scatter_object_list src")) {
    for (const T& x : in) blobs.push_back(ToBytes(x));
  }
  *out = FromBytes<T>(detail::ScatterBytes(blobs, src, group));
}
template <typename T>
void send_object_list(const std::vector<T>& objects, RankArg dst,
                      const GroupPtr& group = nullptr) {
  detail::SendBytes(ToBytes(objects), dst, group);
}
template <typename T>
void recv_object_list(std::vector<T>* objects, RankArg src, const GroupPtr& group = nullptr) {
  *objects = FromBytes<std::vector<T>>(detail::RecvBytes(src, group));
}

}  // namespace dist
}  // namespace paddle_like
