#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
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

const char* AlgorithmName(RawGlooAlgorithm a) {
  switch (a) {
    case RawGlooAlgorithm::kRing: return "ring";
    case RawGlooAlgorithm::kRingChunked: return "ring_chunked";
    case RawGlooAlgorithm::kHalvingDoubling: return "halving_doubling";
    case RawGlooAlgorithm::kBcube: return "bcube";
    case RawGlooAlgorithm::kAllreduce: return "gloo::allreduce";
  }
  return "?";
}

// The dtypes Gloo's own reduction functions cover; others have no raw baseline.
template <typename F>
void VisitRawType(phi::DataType dtype, F&& f) {
  using phi::DataType;
  switch (dtype) {
    case DataType::FLOAT32: return f(float{});
    case DataType::FLOAT64: return f(double{});
    case DataType::INT32: return f(int32_t{});
    case DataType::INT64: return f(int64_t{});
    case DataType::INT8: return f(int8_t{});
    case DataType::UINT8: return f(uint8_t{});
    default:
      PADDLE_THROW(phi::errors::Unimplemented("no raw Gloo baseline for %s",
                                              phi::DataTypeToString(dtype)));
  }
}

template <typename T>
const ::gloo::ReductionFunction<T>* ReductionOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::PRODUCT: return ::gloo::ReductionFunction<T>::product;
    case ReduceOp::MIN: return ::gloo::ReductionFunction<T>::min;
    case ReduceOp::MAX: return ::gloo::ReductionFunction<T>::max;
    default: return ::gloo::ReductionFunction<T>::sum;
  }
}

class RawGloo : public RawAllReduce {
 public:
  RawGloo(std::shared_ptr<::gloo::Context> ctx, RawGlooAlgorithm algo, phi::DataType dtype,
          ReduceOp op, std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), algo_(algo), dtype_(dtype), op_(op), timeout_(timeout) {}

  std::string Name() const override { return AlgorithmName(algo_); }

  // Binds the buffers once per size: the algorithm's standalone best.
  void Prepare(int64_t count, bool) override {
    run_ = nullptr;
    algorithm_.reset();
    options_.reset();
    const size_t bytes = static_cast<size_t>(count) * phi::SizeOf(dtype_);
    buf_.assign(bytes + 64, 0);  // zeros: sums stay zero, no overflow across iterations
    VisitRawType(dtype_, [&](auto tag) {
      using T = decltype(tag);
      T* p = reinterpret_cast<T*>(buf_.data());
      const int n = static_cast<int>(count);
      const auto* fn = ReductionOf<T>(op_);
      switch (algo_) {
        case RawGlooAlgorithm::kRing:
          algorithm_ = std::make_unique<::gloo::AllreduceRing<T>>(ctx_, std::vector<T*>{p}, n, fn);
          break;
        case RawGlooAlgorithm::kRingChunked:
          algorithm_ =
              std::make_unique<::gloo::AllreduceRingChunked<T>>(ctx_, std::vector<T*>{p}, n, fn);
          break;
        case RawGlooAlgorithm::kHalvingDoubling:
          algorithm_ = std::make_unique<::gloo::AllreduceHalvingDoubling<T>>(
              ctx_, std::vector<T*>{p}, n, fn);
          break;
        case RawGlooAlgorithm::kBcube:
          algorithm_ =
              std::make_unique<::gloo::AllreduceBcube<T>>(ctx_, std::vector<T*>{p}, n, fn);
          break;
        case RawGlooAlgorithm::kAllreduce: {
          using Fn = void (*)(void*, const void*, const void*, size_t);
          Fn f = static_cast<Fn>(&::gloo::sum<T>);
          if (op_ == ReduceOp::PRODUCT) f = static_cast<Fn>(&::gloo::product<T>);
          if (op_ == ReduceOp::MIN) f = static_cast<Fn>(&::gloo::min<T>);
          if (op_ == ReduceOp::MAX) f = static_cast<Fn>(&::gloo::max<T>);
          options_ = std::make_unique<::gloo::AllreduceOptions>(ctx_);
          options_->setOutput(p, count);
          options_->setReduceFunction(f);
          options_->setTimeout(timeout_);
          break;
        }
      }
    });
    if (algorithm_) {
      run_ = [this] { algorithm_->run(); };
    } else {
      run_ = [this] { ::gloo::allreduce(*options_); };
    }
  }

  void Run(int iters) override {
    for (int i = 0; i < iters; ++i) run_();
  }

 private:
  std::shared_ptr<::gloo::Context> ctx_;
  RawGlooAlgorithm algo_;
  phi::DataType dtype_;
  ReduceOp op_;
  std::chrono::milliseconds timeout_;
  std::vector<char> buf_;
  std::unique_ptr<::gloo::Algorithm> algorithm_;
  std::unique_ptr<::gloo::AllreduceOptions> options_;
  std::function<void()> run_;
};

}  // namespace

const std::vector<RawGlooAlgorithm>& AllRawGlooAlgorithms() {
  static const std::vector<RawGlooAlgorithm> all = {
      RawGlooAlgorithm::kRing, RawGlooAlgorithm::kRingChunked,
      RawGlooAlgorithm::kHalvingDoubling, RawGlooAlgorithm::kBcube,
      RawGlooAlgorithm::kAllreduce};
  return all;
}

std::vector<RawGlooAlgorithm> SelectedRawGlooAlgorithms(const std::string& names) {
  if (names.empty()) return AllRawGlooAlgorithms();
  std::vector<RawGlooAlgorithm> out;
  size_t pos = 0;
  while (pos <= names.size()) {
    size_t comma = names.find(',', pos);
    if (comma == std::string::npos) comma = names.size();
    const std::string name = names.substr(pos, comma - pos);
    bool found = false;
    for (RawGlooAlgorithm a : AllRawGlooAlgorithms()) {
      if (name == AlgorithmName(a) || (name == "allreduce" && a == RawGlooAlgorithm::kAllreduce)) {
        out.push_back(a);
        found = true;
      }
    }
    PADDLE_ENFORCE(found, phi::errors::InvalidArgument(
                              "unknown raw Gloo algorithm '%s' (ring, ring_chunked, "
                              "halving_doubling, bcube, allreduce)",
                              name.c_str()));
    pos = comma + 1;
  }
  return out;
}

struct RawGlooContext::Impl {
  std::shared_ptr<::gloo::rendezvous::Context> ctx;
  std::chrono::milliseconds timeout;
};

RawGlooContext::RawGlooContext(const std::shared_ptr<phi::distributed::Store>& store, int rank,
                               int size, int timeout_s)
    : impl_(std::make_shared<Impl>()) {
  impl_->timeout = std::chrono::seconds(timeout_s);
  auto prefixed = std::make_shared<phi::distributed::PrefixStore>("comm_bench/raw_gloo", store);
  StoreForGloo adapter(prefixed);
  impl_->ctx = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  impl_->ctx->setTimeout(impl_->timeout);
  auto device = ::gloo::transport::tcp::CreateDevice(Attr());
  impl_->ctx->connectFullMesh(adapter, device);
}

RawGlooContext::~RawGlooContext() = default;

std::unique_ptr<RawAllReduce> RawGlooContext::Make(RawGlooAlgorithm algo, phi::DataType dtype,
                                                   ReduceOp op) {
  return std::make_unique<RawGloo>(impl_->ctx, algo, dtype, op, impl_->timeout);
}

}  // namespace bench
}  // namespace paddle_like
