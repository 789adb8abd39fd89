// paddle_like._C's process groups, Work and collectives: a thin layer over paddle_like::dist.
// Arguments arrive already checked and canonicalised by paddle_like.distributed (global
// ranks, group handles, option values); this file converts arrays to tensors (zero-copy,
// tensor_bridge.h), releases the GIL for everything that communicates or waits, and hands
// back the Work.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "paddle_like/dist/distributed.h"
#include "tensor_bridge.h"

namespace py = pybind11;

namespace paddle_like {
namespace python {
namespace {

using dist::GroupPtr;
using dist::WorkPtr;
using phi::DenseTensor;
using std::chrono::milliseconds;

dist::CollectiveOptions Opts(const GroupPtr& group, bool async_op, double premul = 1.0) {
  dist::CollectiveOptions o;
  o.group = group;
  o.async_op = async_op;
  o.premul_factor = premul;
  return o;
}

milliseconds Ms(int64_t ms) { return ms < 0 ? dist::kUnsetTimeout : milliseconds(ms); }

// Runs `fn` without the GIL: the op may block on peers (or on the comm stream). Returns
// what fn returns (void included).
template <typename Fn>
auto NoGil(Fn&& fn) {
  py::gil_scoped_release nogil;
  return fn();
}

// Runs an op without the GIL; hands Python the Work of an async op only (a sync op has
// been waited for already: wrapping its Work would be pure overhead on every call).
template <typename Fn>
py::object Issue(bool async_op, Fn&& fn) {
  WorkPtr work = NoGil(std::forward<Fn>(fn));
  return async_op ? py::cast(std::move(work)) : py::none();
}

void BindGroupAndWork(py::module_& m) {
  py::class_<dist::Group, GroupPtr>(m, "Group")
      .def_property_readonly("name", &dist::Group::name)
      .def_property_readonly("gid", &dist::Group::gid)
      .def_property_readonly("ranks", &dist::Group::ranks)
      .def_property_readonly("rank", &dist::Group::rank)
      .def_property_readonly("size", &dist::Group::size)
      .def_property_readonly("is_member", &dist::Group::is_member)
      .def_property_readonly("backend_config", &dist::Group::backend_config)
      .def_property_readonly("timeout_ms",
                             [](const dist::Group& g) { return g.timeout().count(); });

  py::class_<dist::Work, WorkPtr>(m, "Work")
      // timeout_ms < 0: the group's timeout (DistTimeoutError when it runs out); else
      // False when the op has not ended by then. Raises the op's error.
      .def("wait", [](dist::Work& w, int64_t ms) { return NoGil([&] { return w.wait(Ms(ms)); }); },
           py::arg("timeout_ms") = -1)
      .def("is_completed", &dist::Work::is_completed)
      .def("is_success", &dist::Work::is_success)
      // Raises the op's error, if any (paddle_like.distributed turns it into a value).
      .def("rethrow",
           [](dist::Work& w) {
             if (auto e = w.exception()) std::rethrow_exception(e);
           })
      .def("source_rank", &dist::Work::source_rank)
      .def("abort", [](dist::Work& w) { NoGil([&] { w.abort(); }); });
}

void BindWorld(py::module_& m) {
  m.def(
      "init_process_group",
      [](const std::string& backend, const std::string& init_method,
         std::shared_ptr<dist::Store> store, int world_size, int rank,
         const std::string& group_name, int64_t timeout_ms) {
        dist::InitOptions o;
        o.backend = backend;
        o.init_method = init_method;
        o.store = std::move(store);
        o.world_size = world_size;
        o.rank = rank;
        o.group_name = group_name;
        o.timeout = Ms(timeout_ms);
        NoGil([&] { dist::init_process_group(o); });
      },
      py::arg("backend"), py::arg("init_method"), py::arg("store"), py::arg("world_size"),
      py::arg("rank"), py::arg("group_name"), py::arg("timeout_ms"));
  m.def("destroy_process_group", [](const GroupPtr& g) {
    NoGil([&] { dist::destroy_process_group(g); });
  });
  m.def("is_initialized", &dist::is_initialized);
  m.def("world", &dist::world);
  m.def("set_timeout", [](int64_t ms, const GroupPtr& g) { dist::set_timeout(Ms(ms), g); });
  m.def("get_default_backend_for_device", &dist::get_default_backend_for_device);
  m.def("is_gloo_available", &dist::is_gloo_available);
  m.def("is_nccl_available", &dist::is_nccl_available);
  m.def("is_mpi_available", &dist::is_mpi_available);
  // pg_options: the backends' option classes (their fields as the C++ structs').
  using distributed::ProcessGroupGlooOptions;
  using distributed::ProcessGroupNCCLOptions;
  using distributed::ProcessGroupOptions;
  py::class_<ProcessGroupOptions, std::shared_ptr<ProcessGroupOptions>>(m, "ProcessGroupOptions")
      .def_property_readonly("backend", &ProcessGroupOptions::backend)
      .def_property(
          "timeout_ms", [](const ProcessGroupOptions& o) { return o.timeout.count(); },
          [](ProcessGroupOptions& o, int64_t ms) { o.timeout = Ms(ms); });
  py::class_<ProcessGroupGlooOptions, ProcessGroupOptions,
             std::shared_ptr<ProcessGroupGlooOptions>>(m, "ProcessGroupGlooOptions")
      .def(py::init<>())
      .def_readwrite("interface", &ProcessGroupGlooOptions::interface)
      .def_readwrite("hostname", &ProcessGroupGlooOptions::hostname);
  py::class_<ProcessGroupNCCLOptions, ProcessGroupOptions,
             std::shared_ptr<ProcessGroupNCCLOptions>>(m, "ProcessGroupNCCLOptions")
      .def(py::init<>())
      .def_readwrite("is_high_priority_stream", &ProcessGroupNCCLOptions::is_high_priority_stream)
      .def_readwrite("blocking", &ProcessGroupNCCLOptions::blocking)
      .def_readwrite("cga_cluster_size", &ProcessGroupNCCLOptions::cga_cluster_size)
      .def_readwrite("min_ctas", &ProcessGroupNCCLOptions::min_ctas)
      .def_readwrite("max_ctas", &ProcessGroupNCCLOptions::max_ctas)
      .def_readwrite("net_name", &ProcessGroupNCCLOptions::net_name);
  m.def("new_group", [](std::vector<int> ranks, int64_t timeout_ms, const std::string& backend,
                        bool use_local_synchronization, bool sort_ranks,
                        std::shared_ptr<ProcessGroupOptions> pg_options,
                        const std::string& group_desc) {
    dist::NewGroupOptions o;
    o.sort_ranks = sort_ranks;
    o.timeout = Ms(timeout_ms);
    o.backend = backend;
    o.use_local_synchronization = use_local_synchronization;
    o.pg_options = std::move(pg_options);
    o.group_desc = group_desc;
    return NoGil([&] { return dist::new_group(std::move(ranks), o); });
  });
  m.def("split_group", [](const GroupPtr& parent, const std::vector<std::vector<int>>& ranks,
                          int64_t timeout_ms, const std::string& backend,
                          std::shared_ptr<ProcessGroupOptions> pg_options,
                          const std::string& group_desc) {
    dist::NewGroupOptions o;
    o.timeout = Ms(timeout_ms);
    o.backend = backend;
    o.pg_options = std::move(pg_options);
    o.group_desc = group_desc;
    return NoGil([&] { return dist::split_group(parent, ranks, o); });
  });
  m.def("shrink_group", [](const std::vector<int>& exclude, const GroupPtr& g, bool abort,
                           int64_t timeout_ms, std::shared_ptr<ProcessGroupOptions> pg_options) {
    dist::ShrinkOptions o;
    o.abort = abort;
    o.timeout = Ms(timeout_ms);
    o.pg_options = std::move(pg_options);
    return NoGil([&] { return dist::shrink_group(exclude, g, o); });
  });
  m.def("monitored_barrier", [](const GroupPtr& g, int64_t timeout_ms, bool wait_all_ranks) {
    NoGil([&] { dist::monitored_barrier(g, Ms(timeout_ms), wait_all_ranks); });
  });
}

void BindCollectives(py::module_& m) {
  using dist::ReduceOp;
  auto op_of = [](int op) { return static_cast<ReduceOp>(op); };
  m.def("all_reduce", [op_of](py::handle t, int op, GroupPtr g, bool async_op, double premul) {
    auto x = TensorFromBuffer(t, true, "all_reduce tensor");
    return Issue(async_op, [&] { return dist::all_reduce(&x, op_of(op), Opts(g, async_op, premul)); });
  });
  m.def("broadcast", [](py::handle t, int src, GroupPtr g, bool async_op) {
    auto x = TensorFromBuffer(t, true, "broadcast tensor");
    return Issue(async_op, [&] { return dist::broadcast(&x, src, Opts(g, async_op)); });
  });
  m.def("reduce", [op_of](py::handle t, int dst, int op, GroupPtr g, bool async_op,
                          double premul) {
    auto x = TensorFromBuffer(t, true, "reduce tensor");
    return Issue(async_op, [&] { return dist::reduce(&x, dst, op_of(op), Opts(g, async_op, premul)); });
  });
  m.def("all_gather_into_tensor", [](py::handle out, py::handle in, GroupPtr g, bool async_op) {
    auto o = TensorFromBuffer(out, true, "all_gather output");
    auto i = TensorFromBuffer(in, false, "all_gather input");
    return Issue(async_op, [&] { return dist::all_gather_into_tensor(&o, i, Opts(g, async_op)); });
  });
  m.def("reduce_scatter_tensor", [op_of](py::handle out, py::handle in, int op, GroupPtr g,
                                         bool async_op, double premul) {
    auto o = TensorFromBuffer(out, true, "reduce_scatter output");
    auto i = TensorFromBuffer(in, false, "reduce_scatter input");
    return Issue(async_op, [&] {
      return dist::reduce_scatter_tensor(&o, i, op_of(op), Opts(g, async_op, premul));
    });
  });
  m.def("reduce_scatter", [op_of](py::handle out, py::handle ins, int op, GroupPtr g,
                                  bool async_op, double premul) {
    auto o = TensorFromBuffer(out, true, "reduce_scatter output");
    auto i = TensorsFromList(ins, false, "reduce_scatter input_list");
    return Issue(async_op, [&] { return dist::reduce_scatter(&o, i, op_of(op), Opts(g, async_op, premul)); });
  });
  m.def("all_to_all_single", [](py::handle out, py::handle in, std::vector<int64_t> out_splits,
                                std::vector<int64_t> in_splits, GroupPtr g, bool async_op) {
    auto o = TensorFromBuffer(out, true, "all_to_all_single output");
    auto i = TensorFromBuffer(in, false, "all_to_all_single input");
    return Issue(async_op, [&] {
      return dist::all_to_all_single(&o, i, out_splits, in_splits, Opts(g, async_op));
    });
  });
  m.def("all_to_all", [](py::handle outs, py::handle ins, GroupPtr g, bool async_op) {
    auto o = TensorsFromList(outs, true, "all_to_all output_tensor_list");
    auto i = TensorsFromList(ins, false, "all_to_all input_tensor_list");
    return Issue(async_op, [&] { return dist::all_to_all(&o, i, Opts(g, async_op)); });
  });
  // gather_list / scatter_list: None off the root.
  m.def("gather", [](py::handle t, py::object list, int dst, GroupPtr g, bool async_op) {
    auto x = TensorFromBuffer(t, false, "gather tensor");
    std::vector<DenseTensor> outs;
    if (!list.is_none()) outs = TensorsFromList(list, true, "gather gather_list");
    return Issue(async_op, [&] { return dist::gather(x, &outs, dst, Opts(g, async_op)); });
  });
  m.def("gather_into_tensor", [](py::handle out, py::handle in, int dst, GroupPtr g,
                                 bool async_op) {
    auto o = TensorFromBuffer(out, true, "gather output");
    auto i = TensorFromBuffer(in, false, "gather input");
    return Issue(async_op, [&] { return dist::gather_into_tensor(&o, i, dst, Opts(g, async_op)); });
  });
  m.def("scatter", [](py::handle t, py::object list, int src, GroupPtr g, bool async_op) {
    auto x = TensorFromBuffer(t, true, "scatter tensor");
    std::vector<DenseTensor> ins;
    if (!list.is_none()) ins = TensorsFromList(list, false, "scatter scatter_list");
    return Issue(async_op, [&] { return dist::scatter(&x, ins, src, Opts(g, async_op)); });
  });
  m.def("barrier", [](GroupPtr g, bool async_op, std::vector<int> device_ids) {
    return Issue(async_op, [&] { return dist::barrier(Opts(g, async_op), device_ids); });
  });
  m.def("isend", [](py::handle t, int dst, GroupPtr g, int tag) {
    auto x = TensorFromBuffer(t, false, "isend tensor");
    return NoGil([&] { return dist::isend(x, dst, {g, tag}); });
  });
  m.def("irecv", [](py::handle t, int src, GroupPtr g, int tag) {
    auto x = TensorFromBuffer(t, true, "irecv tensor");
    return NoGil([&] { return dist::irecv(&x, src, {g, tag}); });
  });
  // ops: (is_send, array, global peer, group, tag) tuples.
  m.def("batch_isend_irecv", [](py::list ops) {
    std::vector<DenseTensor> tensors;
    tensors.reserve(ops.size());
    std::vector<dist::P2POp> batch;
    for (const auto& item : ops) {
      auto op = item.cast<py::tuple>();
      const bool is_send = op[0].cast<bool>();
      tensors.push_back(TensorFromBuffer(op[1], !is_send, "batch_isend_irecv tensor"));
      auto g = op[3].cast<GroupPtr>();
      const int peer = op[2].cast<int>(), tag = op[4].cast<int>();
      batch.push_back(is_send ? dist::P2POp::isend(&tensors.back(), peer, g, tag)
                              : dist::P2POp::irecv(&tensors.back(), peer, g, tag));
    }
    return NoGil([&] { return dist::batch_isend_irecv(batch); });
  });
  m.def("all_reduce_coalesced", [op_of](py::handle ts, int op, GroupPtr g, bool async_op,
                                        double premul) {
    auto xs = TensorsFromList(ts, true, "all_reduce_coalesced tensors");
    std::vector<DenseTensor*> ptrs;
    for (auto& x : xs) ptrs.push_back(&x);
    return Issue(async_op, [&] {
      return dist::all_reduce_coalesced(ptrs, op_of(op), Opts(g, async_op, premul));
    });
  });
  m.def("all_gather_single_coalesced", [](py::handle outs, py::handle ins, GroupPtr g,
                                          bool async_op) {
    auto o = TensorsFromList(outs, true, "all_gather_single_coalesced outputs");
    auto i = TensorsFromList(ins, false, "all_gather_single_coalesced inputs");
    return Issue(async_op, [&] { return dist::all_gather_single_coalesced(&o, i, Opts(g, async_op)); });
  });
  m.def("reduce_scatter_single_coalesced", [op_of](py::handle outs, py::handle ins, int op,
                                                   GroupPtr g, bool async_op, double premul) {
    auto o = TensorsFromList(outs, true, "reduce_scatter_single_coalesced outputs");
    auto i = TensorsFromList(ins, false, "reduce_scatter_single_coalesced inputs");
    return Issue(async_op, [&] {
      return dist::reduce_scatter_single_coalesced(&o, i, op_of(op), Opts(g, async_op, premul));
    });
  });
}

}  // namespace

void BindDist(py::module_& m) {
  m.def("copy_into", &CopyInto, py::arg("dst"), py::arg("src"));
  BindGroupAndWork(m);
  BindWorld(m);
  BindCollectives(m);
}

}  // namespace python
}  // namespace paddle_like
