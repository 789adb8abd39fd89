// InlineFunction<R(Args...), N>: a copyable callable wrapper like std::function that keeps
// callables of up to N bytes inside itself instead of on the heap.
//
// Why: the engine wraps every op's body in one (distributed/process_group_with_stream.h,
// CommFn, N = 160). Those bodies capture pointers, sizes, a reduction and an agreement
// record, up to about 120 bytes, which std::function (16 bytes inline in libstdc++) allocates
// for on every op; a small all-reduce is short enough that the allocation and its free show
// in its time. Larger callables still work: they go to the heap, as with std::function.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace phi {

template <typename Signature, size_t N = 128>
class InlineFunction;

template <typename R, typename... Args, size_t N>
class InlineFunction<R(Args...), N> {
 public:
  InlineFunction() = default;
  InlineFunction(std::nullptr_t) {}  // NOLINT: as std::function
  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& f) {  // NOLINT: as std::function
    if constexpr (Fits<D>()) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(f));
      ops_ = &kHeapOps<D>;
    }
  }
  InlineFunction(const InlineFunction& o) : ops_(o.ops_) {
    if (ops_) ops_->copy(buf_, o.buf_);
  }
  InlineFunction(InlineFunction&& o) noexcept : ops_(o.ops_) {
    if (ops_) ops_->move(buf_, o.buf_);
    o.ops_ = nullptr;
  }
  InlineFunction& operator=(InlineFunction o) noexcept {
    Reset();
    ops_ = o.ops_;
    if (ops_) ops_->move(buf_, o.buf_);
    o.ops_ = nullptr;
    return *this;
  }
  ~InlineFunction() { Reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) const {
    return ops_->call(const_cast<unsigned char*>(buf_), std::forward<Args>(args)...);
  }

 private:
  struct Ops {
    R (*call)(void*, Args&&...);
    void (*copy)(void* to, const void* from);
    void (*move)(void* to, void* from);  // leaves `from` destroyed
    void (*destroy)(void*);
  };
  template <typename D>
  static constexpr bool Fits() {
    return sizeof(D) <= N && alignof(D) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<D>;
  }
  template <typename D>
  static inline const Ops kInlineOps = {
      [](void* p, Args&&... a) -> R { return (*static_cast<D*>(p))(std::forward<Args>(a)...); },
      [](void* to, const void* from) { ::new (to) D(*static_cast<const D*>(from)); },
      [](void* to, void* from) {
        ::new (to) D(std::move(*static_cast<D*>(from)));
        static_cast<D*>(from)->~D();
      },
      [](void* p) { static_cast<D*>(p)->~D(); }};
  template <typename D>
  static inline const Ops kHeapOps = {
      [](void* p, Args&&... a) -> R { return (**static_cast<D**>(p))(std::forward<Args>(a)...); },
      [](void* to, const void* from) {
        *static_cast<D**>(to) = new D(**static_cast<D* const*>(from));
      },
      [](void* to, void* from) { *static_cast<D**>(to) = *static_cast<D**>(from); },
      [](void* p) { delete *static_cast<D**>(p); }};

  void Reset() {
    if (ops_) ops_->destroy(buf_);
    ops_ = nullptr;
  }

  const Ops* ops_ = nullptr;
  alignas(std::max_align_t) unsigned char buf_[N];
};

}  // namespace phi
