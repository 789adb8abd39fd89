// paddle_like._C's stores: the runtime's TCPStore, FileStore, HashStore and PrefixStore,
// usable as init_process_group(store=...) and on their own (torch.distributed's names).
// Values are bytes; a str is stored as its UTF-8 bytes.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "phi/core/distributed/store/file_store.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/distributed/store/tcp_store.h"

namespace py = pybind11;

namespace paddle_like {
namespace python {
namespace {

using phi::distributed::Store;
using Bytes = std::vector<uint8_t>;
using std::chrono::milliseconds;

Bytes ToBytes(const py::object& v) {
  std::string s = py::isinstance<py::str>(v) ? v.cast<std::string>()
                                             : std::string(v.cast<py::bytes>());
  return Bytes(s.begin(), s.end());
}
py::bytes FromBytes(const Bytes& v) {
  return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}
milliseconds Ms(const py::object& timeout) {
  if (py::hasattr(timeout, "total_seconds")) {
    return milliseconds(static_cast<int64_t>(timeout.attr("total_seconds")().cast<double>() * 1000));
  }
  return milliseconds(static_cast<int64_t>(timeout.cast<double>() * 1000));
}

}  // namespace

void BindStores(py::module_& m) {
  py::class_<Store, std::shared_ptr<Store>>(m, "Store")
      .def("set", [](Store& s, const std::string& k, const py::object& v) {
        auto b = ToBytes(v);
        py::gil_scoped_release nogil;
        s.set(k, b);
      })
      .def("get", [](Store& s, const std::string& k) {
        Bytes v;
        {
          py::gil_scoped_release nogil;
          v = s.get(k);
        }
        return FromBytes(v);
      })
      .def("add", &Store::add, py::call_guard<py::gil_scoped_release>())
      .def("compare_set", [](Store& s, const std::string& k, const py::object& expected,
                             const py::object& desired) {
        auto e = ToBytes(expected), d = ToBytes(desired);
        Bytes v;
        {
          py::gil_scoped_release nogil;
          v = s.compare_set(k, e, d);
        }
        return FromBytes(v);
      })
      .def("wait", [](Store& s, const std::vector<std::string>& keys, py::object timeout) {
        milliseconds t = timeout.is_none() ? s.timeout() : Ms(timeout);
        py::gil_scoped_release nogil;
        s.wait(keys, t);
      }, py::arg("keys"), py::arg("timeout") = py::none())
      .def("check", &Store::check, py::call_guard<py::gil_scoped_release>())
      .def("delete_key", &Store::delete_key, py::call_guard<py::gil_scoped_release>())
      .def("num_keys", &Store::num_keys, py::call_guard<py::gil_scoped_release>())
      .def("set_timeout", [](Store& s, const py::object& t) { s.set_timeout(Ms(t)); })
      .def_property_readonly("timeout", [](const Store& s) { return s.timeout(); });

  py::class_<phi::distributed::TCPStore, Store, std::shared_ptr<phi::distributed::TCPStore>>(
      m, "TCPStore")
      .def(py::init([](const std::string& host, int port, int world_size, bool is_master,
                       py::object timeout) {
             phi::distributed::TCPStoreOptions o;
             o.host = host;
             o.port = static_cast<uint16_t>(port);
             o.is_master = is_master;
             o.world_size = world_size < 0 ? 0 : world_size;
             if (!timeout.is_none()) o.timeout = Ms(timeout);
             py::gil_scoped_release nogil;
             return std::make_shared<phi::distributed::TCPStore>(o);
           }),
           py::arg("host_name"), py::arg("port"), py::arg("world_size") = -1,
           py::arg("is_master") = false, py::arg("timeout") = py::none());
  py::class_<phi::distributed::FileStore, Store, std::shared_ptr<phi::distributed::FileStore>>(
      m, "FileStore")
      .def(py::init([](const std::string& path, int /*world_size*/) {
             return std::make_shared<phi::distributed::FileStore>(path);
           }),
           py::arg("file_name"), py::arg("world_size") = -1);
  py::class_<phi::distributed::HashStore, Store, std::shared_ptr<phi::distributed::HashStore>>(
      m, "HashStore")
      .def(py::init([] { return std::make_shared<phi::distributed::HashStore>(); }));
  py::class_<phi::distributed::PrefixStore, Store,
             std::shared_ptr<phi::distributed::PrefixStore>>(m, "PrefixStore")
      .def(py::init([](const std::string& prefix, std::shared_ptr<Store> store) {
             return std::make_shared<phi::distributed::PrefixStore>(prefix, std::move(store));
           }),
           py::arg("prefix"), py::arg("store"));
}

}  // namespace python
}  // namespace paddle_like
