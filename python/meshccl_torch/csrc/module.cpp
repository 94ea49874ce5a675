// SPDX-License-Identifier: Apache-2.0
//
// meshccl_torch._C: the Python binding of ProcessGroupMeshccl. The class
// derives from torch.distributed's binding of its base class (c10d Backend
// with PyTorch 2.x, ProcessGroup with 1.13: torch_compat.hpp), registered by
// torch._C._distributed_c10d, which must be imported first (meshccl_torch's
// __init__.py imports torch.distributed), as PyTorch's own test extension
// for third-party backends (test/cpp_extensions/cpp_c10d_extension.cpp) does.
#include <torch/extension.h>

#include <chrono>

#include "process_group_meshccl.hpp"

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
  m.doc() = "meshccl process group for torch.distributed (CPU tensors)";
  py::class_<meshccl_torch::ProcessGroupMeshccl, meshccl_torch::PgBase,
             c10::intrusive_ptr<meshccl_torch::ProcessGroupMeshccl>>(m, "ProcessGroupMeshccl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                       int64_t timeout_ms, bool async, const std::string &label) {
             return c10::make_intrusive<meshccl_torch::ProcessGroupMeshccl>(
                 store, rank, size, std::chrono::milliseconds(timeout_ms), async, label);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
           py::arg("async_ops") = true, py::arg("label") = "",
           py::call_guard<py::gil_scoped_release>(),
           "Rank `rank` of `size`; the unique id goes through `store`; `timeout_ms` bounds init "
           "and each operation; async_ops runs operations on a worker thread; label (e.g. "
           "\"global rank 3, group 2\") goes into every message.")
      .def_property_readonly("is_async", &meshccl_torch::ProcessGroupMeshccl::isAsync)
      .def_property_readonly_static("UNIQUE_ID_KEY", [](py::object) {
        return meshccl_torch::ProcessGroupMeshccl::kUniqueIdKey;
      });
  // The PyTorch the extension was compiled against, and its base class.
  m.attr("TORCH_VERSION") = TORCH_VERSION;
  m.attr("IS_C10D_BACKEND") = static_cast<bool>(MESHCCL_TORCH_BACKEND);
  m.def(
      "nccl_version",
      [] {
        int v = 0;
        ncclGetVersion(&v);
        return v;
      },
      "NCCL_VERSION_CODE of the meshccl library loaded (e.g. 23007).");
}
