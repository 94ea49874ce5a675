// SPDX-License-Identifier: Apache-2.0
//
// The one place that knows which PyTorch the extension compiles against
// (docs/PYTORCH.md, "Versions"). PyTorch 2.0 split c10d's ProcessGroup into a
// front end that dispatches by device and a c10d::Backend per device type
// (torch/csrc/distributed/c10d/Backend.hpp); third-party backends derive from
// Backend and are registered for their devices
// (Backend.register_backend(name, func, devices=[...])). PyTorch 1.13's
// third-party backends derive from ProcessGroup itself. Everything that
// differs between the two is defined here, so that the rest of the backend
// has no version checks:
//   MESHCCL_TORCH_BACKEND   1: c10d::Backend (PyTorch >= 2.0), 0: ProcessGroup (1.13)
//   MESHCCL_OVERRIDE_2X     `override` on what only 2.x's base class declares
//   meshccl_torch::PgBase   the base class of ProcessGroupMeshccl
//   kCoalescedOpType        the OpType of a batch's Work (endCoalescing)
//   premulTensorFactor()    PREMUL_SUM's tensor factor, or an undefined tensor
#pragma once

#include <torch/version.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if TORCH_VERSION_MAJOR >= 2
#define MESHCCL_TORCH_BACKEND 1
#define MESHCCL_OVERRIDE_2X   override
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#define MESHCCL_TORCH_BACKEND 0
#define MESHCCL_OVERRIDE_2X
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace meshccl_torch
{

#if MESHCCL_TORCH_BACKEND
using PgBase = c10d::Backend;
constexpr c10d::OpType kCoalescedOpType = c10d::OpType::COALESCED;
#else
using PgBase = c10d::ProcessGroup;
constexpr c10d::OpType kCoalescedOpType = c10d::OpType::UNKNOWN;
#endif

// PREMUL_SUM's supplement (dist._make_nccl_premul_sum): 1.13 keeps a list of
// tensor factors (one per device), 2.x one tensor; both keep a double factor
// when no tensor was given.
inline at::Tensor premulTensorFactor(const c10d::NCCLPreMulSumSupplement &sup)
{
#if MESHCCL_TORCH_BACKEND
  return sup.tensor_factor;
#else
  return sup.tensor_factors.empty() ? at::Tensor() : sup.tensor_factors[0];
#endif
}

} // namespace meshccl_torch
