#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "phi/core/distributed/gloo_comm_context.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/errors.h"
#include "tools/comm_bench/bench_baseline.h"

namespace paddle_like {
namespace bench {
namespace {

using phi::distributed::ReduceOp;

class StoreForGloo : public ::gloo::rendezvous::Store {
 public:
  explicit StoreForGloo(std::shared_ptr<phi::distributed::Store> s) : s_(std::move(s)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    s_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = s_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { s_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    s_->wait(keys, t);
  }

 private:
  std::shared_ptr<phi::distributed::Store> s_;
};

// The address the engine's Gloo context would use (loopback for a local job).
::gloo::transport::tcp::attr Attr() {
  auto endpoint = phi::distributed::ResolveGlooEndpoint(phi::distributed::GlooOptions());
  ::gloo::transport::tcp::attr attr;
  attr.hostname = endpoint.hostname;
  attr.iface = endpoint.iface;
  return attr;
}

class RawGloo : public RawAllReduce {
 public:
  RawGloo(const std::shared_ptr<phi::distributed::Store>& store, int rank, int size,
          phi::DataType dtype, ReduceOp op, int timeout_s, bool reuse_options)
      : dtype_(dtype),
        op_(op),
        timeout_(std::chrono::seconds(timeout_s)),
        reuse_options_(reuse_options) {
    auto prefixed =
        std::make_shared<phi::distributed::PrefixStore>("comm_bench/raw_gloo", store);
    StoreForGloo adapter(prefixed);
    ctx_ = std::make_shared<::gloo::rendezvous::Context>(rank, size);
    ctx_->setTimeout(timeout_);
    auto device = ::gloo::transport::tcp::CreateDevice(Attr());
    ctx_->connectFullMesh(adapter, device);
  }

  std::string Name() const override {
    return reuse_options_ ? "gloo::allreduce (options reused)" : "gloo::allreduce";
  }

  void Prepare(int64_t count, bool in_place) override {
    count_ = count;
    in_place_ = in_place;
    size_t bytes = static_cast<size_t>(count) * phi::SizeOf(dtype_);
    in_.assign(bytes, 1);
    out_.assign(in_place ? 0 : bytes, 0);
  }

  void Run(int iters) override {
    phi::VisitDataType(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, phi::dtype::complex64> ||
                    std::is_same_v<T, phi::dtype::complex128>) {
        PADDLE_THROW(phi::errors::Unimplemented("no raw baseline for this dtype"));
      } else {
        using Fn = void (*)(void*, const void*, const void*, size_t);
        Fn fn = static_cast<Fn>(&::gloo::sum<T>);
        switch (op_) {
          case ReduceOp::PRODUCT: fn = static_cast<Fn>(&::gloo::product<T>); break;
          case ReduceOp::MIN: fn = static_cast<Fn>(&::gloo::min<T>); break;
          case ReduceOp::MAX: fn = static_cast<Fn>(&::gloo::max<T>); break;
          default: break;
        }
        T* in = reinterpret_cast<T*>(in_.data());
        T* out = reinterpret_cast<T*>(out_.data());
        // Options per call, as a caller whose tensors change from call to call must (binding
        // buffers is part of the call's cost); reuse_options_ keeps one set for the best case.
        auto run = [&](::gloo::AllreduceOptions& opts) { ::gloo::allreduce(opts); };
        auto make = [&]() {
          auto opts = std::make_unique<::gloo::AllreduceOptions>(ctx_);
          if (in_place_) {
            opts->setOutput(in, count_);
          } else {
            opts->setInput(in, count_);
            opts->setOutput(out, count_);
          }
          opts->setReduceFunction(fn);
          opts->setTimeout(timeout_);
          return opts;
        };
        if (reuse_options_) {
          auto opts = make();
          for (int i = 0; i < iters; ++i) run(*opts);
        } else {
          for (int i = 0; i < iters; ++i) run(*make());
        }
      }
    });
  }

 private:
  phi::DataType dtype_;
  ReduceOp op_;
  std::chrono::milliseconds timeout_;
  bool reuse_options_;
  std::shared_ptr<::gloo::rendezvous::Context> ctx_;
  int64_t count_ = 0;
  bool in_place_ = false;
  std::vector<char> in_, out_;
};

}  // namespace

std::unique_ptr<RawAllReduce> MakeRawGloo(const std::shared_ptr<phi::distributed::Store>& store,
                                          int rank, int size, phi::DataType dtype, ReduceOp op,
                                          int timeout_s, bool reuse_options) {
  return std::make_unique<RawGloo>(store, rank, size, dtype, op, timeout_s, reuse_options);
}

}  // namespace bench
}  // namespace paddle_like
