// Vocab-parallel operators: the vocabulary (rows of the embedding table, columns of the
// logits) is split across the ring, rank r holding [r * shard, (r + 1) * shard).
//
//   c_embedding:      W [shard, D], Ids -> Out [Ids..., D]; start_index, vocab_size (-1:
//                     unchecked). An id outside this shard gives a zero row; the partial
//                     outputs are summed by a c_allreduce_sum after it (as in Megatron).
//   c_embedding_grad: W, Ids, Out@GRAD -> W@GRAD; start_index.
//   c_softmax_with_cross_entropy: Logits [N, C/nranks], Label [N] or [N, 1] (global class
//                     ids) -> Softmax [N, C/nranks], Loss [N, 1]; ring_id, rank, nranks,
//                     ignore_index (-100). Two all-reduces (max, then sum of exps together
//                     with the label's logit), on the op's stream, waited for before the
//                     local math.
//   c_softmax_with_cross_entropy_grad: Softmax, Label, Loss@GRAD -> Logits@GRAD (local).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace operators {

namespace {

using phi::distributed::ReduceOp;

void CEmbeddingKernel(const ExecutionContext& ctx) {
  const DenseTensor& w = ctx.Input("W");
  const DenseTensor& ids = ctx.Input("Ids");
  const int64_t start = ctx.AttrOr<int64_t>("start_index", 0);
  const int64_t vocab = ctx.AttrOr<int64_t>("vocab_size", -1);
  CheckArg(ctx, ids.dtype() == phi::DataType::INT64, "Ids must be int64");
  CheckArg(ctx, w.dims().size() == 2, "W must be [rows, D], got " + w.dims().to_str());
  if (vocab >= 0) {
    const int64_t* id = ids.data<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      CheckArg(ctx, id[i] >= 0 && id[i] < vocab,
               "id " + std::to_string(id[i]) + " is outside the vocabulary [0, " +
                   std::to_string(vocab) + ")");
    }
  }
  phi::EmbeddingKernel(ids, w, start, /*out_of_range_is_zero=*/true, /*padding_idx=*/-1,
                       ctx.Output("Out"));
}

void CEmbeddingGradKernel(const ExecutionContext& ctx) {
  phi::EmbeddingGradKernel(ctx.Input("Ids"), ctx.Input("Out@GRAD"), ctx.Input("W").dims(),
                           ctx.AttrOr<int64_t>("start_index", 0), /*padding_idx=*/-1,
                           ctx.Output("W@GRAD"));
}

struct CeShapes {
  int64_t n = 0;      // rows
  int64_t c = 0;      // local classes
  int64_t start = 0;  // first global class of this rank
};

// Checks shapes and labels (every label a global class or ignore_index) before any
// communication.
CeShapes CheckCe(const ExecutionContext& ctx, const CommOp& comm, const DenseTensor& logits,
                 const DenseTensor& label, int64_t ignore_index) {
  CheckArg(ctx, logits.dims().size() == 2,
           "Logits must be [N, C / nranks], got " + logits.dims().to_str());
  CheckArg(ctx, label.dtype() == phi::DataType::INT64, "Label must be int64");
  CeShapes s{logits.dims()[0], logits.dims()[1], comm.rank * logits.dims()[1]};
  CheckArg(ctx, label.numel() == s.n && (label.dims().size() == 1 || label.dims().size() == 2),
           "Label must be [N] or [N, 1] with N = " + std::to_string(s.n) + ", got " +
               label.dims().to_str());
  const int64_t classes = s.c * comm.nranks;
  const int64_t* l = label.data<int64_t>();
  for (int64_t i = 0; i < s.n; ++i) {
    CheckArg(ctx, l[i] == ignore_index || (l[i] >= 0 && l[i] < classes),
             "label " + std::to_string(l[i]) + " is outside the " + std::to_string(classes) +
                 " classes of the ring (and is not ignore_index " + std::to_string(ignore_index) +
                 ")");
  }
  return s;
}

template <typename T>
void SoftmaxCe(const ExecutionContext& ctx, const CommOp& comm, const DenseTensor& logits,
               const DenseTensor& label, int64_t ignore_index, const CeShapes& s) {
  const T* x = logits.data<T>();
  const int64_t* l = label.data<int64_t>();
  auto all_reduce = [&](DenseTensor* t, ReduceOp op) {
    distributed::AllreduceOptions o;
    o.reduce_op = op;
    IssueCommAndWait(ctx, comm, [&](bool sync_op, bool calc) {
      return comm.pg->AllReduce(t, *t, o, sync_op, calc);
    });
  };
  // 1. The global row maxima.
  DenseTensor mx(ctx.GetPlace(), phi::DataType::FLOAT64, phi::DDim({s.n}));
  double* m = mx.data<double>();
  for (int64_t i = 0; i < s.n; ++i) {
    m[i] = -INFINITY;
    for (int64_t j = 0; j < s.c; ++j) m[i] = std::max(m[i], static_cast<double>(x[i * s.c + j]));
  }
  all_reduce(&mx, ReduceOp::MAX);
  // 2. Sums of exps (first n) and the label's shifted logit (next n; 0 off its shard).
  DenseTensor sums(ctx.GetPlace(), phi::DataType::FLOAT64, phi::DDim({2 * s.n}));
  double* sum = sums.data<double>();
  for (int64_t i = 0; i < s.n; ++i) {
    double acc = 0;
    for (int64_t j = 0; j < s.c; ++j) acc += std::exp(static_cast<double>(x[i * s.c + j]) - m[i]);
    sum[i] = acc;
    const int64_t local = l[i] - s.start;
    sum[s.n + i] = (l[i] != ignore_index && local >= 0 && local < s.c)
                       ? static_cast<double>(x[i * s.c + local]) - m[i]
                       : 0.0;
  }
  all_reduce(&sums, ReduceOp::SUM);
  DenseTensor softmax(ctx.GetPlace(), logits.dtype(), logits.dims());
  DenseTensor loss(ctx.GetPlace(), logits.dtype(), phi::DDim({s.n, 1}));
  T* sm = softmax.data<T>();
  T* ls = loss.data<T>();
  for (int64_t i = 0; i < s.n; ++i) {
    for (int64_t j = 0; j < s.c; ++j) {
      sm[i * s.c + j] =
          static_cast<T>(std::exp(static_cast<double>(x[i * s.c + j]) - m[i]) / sum[i]);
    }
    ls[i] = l[i] == ignore_index ? T(0) : static_cast<T>(std::log(sum[i]) - sum[s.n + i]);
  }
  *ctx.Output("Softmax") = std::move(softmax);
  *ctx.Output("Loss") = std::move(loss);
}

void CSoftmaxCeKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  const DenseTensor& logits = ctx.Input("Logits");
  const DenseTensor& label = ctx.Input("Label");
  const int64_t ignore_index = ctx.AttrOr<int64_t>("ignore_index", -100);
  const CeShapes s = CheckCe(ctx, comm, logits, label, ignore_index);
  if (logits.dtype() == phi::DataType::FLOAT64) {
    SoftmaxCe<double>(ctx, comm, logits, label, ignore_index, s);
  } else {
    SoftmaxCe<float>(ctx, comm, logits, label, ignore_index, s);
  }
}

template <typename T>
void SoftmaxCeGrad(const ExecutionContext& ctx, const DenseTensor& softmax,
                   const DenseTensor& label, const DenseTensor& dloss, int64_t ignore_index,
                   const CeShapes& s) {
  DenseTensor dx(ctx.GetPlace(), softmax.dtype(), softmax.dims());
  const T* sm = softmax.data<T>();
  const T* dl = dloss.data<T>();
  const int64_t* l = label.data<int64_t>();
  T* g = dx.data<T>();
  for (int64_t i = 0; i < s.n; ++i) {
    const bool ignored = l[i] == ignore_index;
    for (int64_t j = 0; j < s.c; ++j) {
      const double onehot = (!ignored && l[i] - s.start == j) ? 1.0 : 0.0;
      g[i * s.c + j] = ignored ? T(0)
                               : static_cast<T>((static_cast<double>(sm[i * s.c + j]) - onehot) *
                                                static_cast<double>(dl[i]));
    }
  }
  *ctx.Output("Logits@GRAD") = std::move(dx);
}

void CSoftmaxCeGradKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  const DenseTensor& softmax = ctx.Input("Softmax");
  const DenseTensor& label = ctx.Input("Label");
  const DenseTensor& dloss = ctx.Input("Loss@GRAD");
  const int64_t ignore_index = ctx.AttrOr<int64_t>("ignore_index", -100);
  const CeShapes s = CheckCe(ctx, comm, softmax, label, ignore_index);
  CheckArg(ctx, dloss.numel() == s.n && dloss.dtype() == softmax.dtype(),
           "Loss@GRAD must hold N = " + std::to_string(s.n) + " elements of Softmax's dtype, got " +
               dloss.dims().to_str());
  if (softmax.dtype() == phi::DataType::FLOAT64) {
    SoftmaxCeGrad<double>(ctx, softmax, label, dloss, ignore_index, s);
  } else {
    SoftmaxCeGrad<float>(ctx, softmax, label, dloss, ignore_index, s);
  }
}

}  // namespace

void RegisterVocabParallelOps(KernelRegistry* r) {
  const auto cpu = phi::AllocationType::CPU;
  r->RegisterTypes<float, double>("c_embedding", cpu, CEmbeddingKernel);
  r->SetKeyInput("c_embedding", "W");
  r->RegisterTypes<float, double>("c_embedding_grad", cpu, CEmbeddingGradKernel);
  r->SetKeyInput("c_embedding_grad", "W");
  r->RegisterTypes<float, double>("c_softmax_with_cross_entropy", cpu, CSoftmaxCeKernel);
  r->SetKeyInput("c_softmax_with_cross_entropy", "Logits");
  r->RegisterTypes<float, double>("c_softmax_with_cross_entropy_grad", cpu, CSoftmaxCeGradKernel);
  r->SetKeyInput("c_softmax_with_cross_entropy_grad", "Softmax");
}

}  // namespace operators
}  // namespace paddle_like
