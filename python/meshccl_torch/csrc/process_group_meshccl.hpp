// SPDX-License-Identifier: Apache-2.0
//
// ProcessGroupMeshccl: a torch.distributed backend over one meshccl
// communicator, for CPU tensors: a c10d::Backend registered for device "cpu"
// with PyTorch >= 2.0, a c10d::ProcessGroup with PyTorch 1.13
// (torch_compat.hpp). It plays the part
// ProcessGroupNCCL (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp) plays
// for GPUs: the communicator's unique id goes through the c10d store (rank 0
// ncclGetUniqueId -> store.set, the others store.get), every collective is one
// NCCL call (or one ncclGroupStart/End of calls) on that communicator.
//
// Execution (docs/PYTORCH.md): by default every operation is queued to one
// worker thread per process group and its Work completes asynchronously, as
// ProcessGroupGloo's work queue does; with async = false it runs on the
// calling thread and the Work returned is already completed. Operations run
// in the order they were issued, which must be the same on every rank (NCCL's
// rule). A watchdog thread revokes the communicator (ncclCommRevoke) when one
// operation runs longer than its timeout; the process group is then unusable,
// as ProcessGroupNCCL's watchdog leaves a timed-out communicator.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <nccl.h>

#include "torch_compat.hpp"

namespace meshccl_torch
{

// The handle c10d returns for one operation. It completes once, from the
// thread that ran the operation; wait() rethrows the operation's error.
class WorkMeshccl : public c10d::Work
{
public:
  WorkMeshccl(int rank, c10d::OpType type, const char *profiling_title,
              std::vector<at::Tensor> outputs);

  // Waits for completion (timeout 0: no limit); throws the operation's error,
  // or a timeout error naming the operation. An operation of a batch that is
  // still open (between startCoalescing and endCoalescing) runs when the
  // batch ends: its wait() returns at once, as a coalesced operation's
  // wait() on ProcessGroupNCCL does not wait for the batch, and PyTorch 2.x's
  // blocking collectives inside _coalescing_manager call it.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  // A future of the output tensors (List[Tensor]), completed with the work:
  // DistributedDataParallel's reducer waits on it.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Marks the work done (error == nullptr: success). Called once.
  void complete(std::exception_ptr error);

  // "all_reduce of 1024 float32 elements", for messages.
  std::string what;
  // Set while the operation is in a batch not yet ended.
  std::atomic<bool> in_open_batch{false};

private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupMeshccl : public PgBase
{
public:
  // Creates rank `rank` of `size`: rank 0 makes the unique id and stores it
  // under a key of `store` (a PrefixStore of the group's name, from
  // torch.distributed), the others read it (with MESHCCL_SECRET set, only
  // the published id goes through the store and every rank adds the
  // secret: meshcclGetPublicUniqueId), then every rank inits the
  // communicator, failing after `timeout` (the process group's timeout,
  // also each operation's unless its options give one). async selects the
  // worker thread (true) or the calling thread (false); label ("global rank
  // 3, group 2", or empty) goes into messages. Throws naming the rank, the
  // store key and the step that failed.
  ProcessGroupMeshccl(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                      std::chrono::milliseconds timeout, bool async, const std::string &label);
  ~ProcessGroupMeshccl() override;

  const std::string getBackendName() const override
  {
    return "meshccl";
  }

  // Operations not queued on a worker (async = false) run here.
  bool isAsync() const
  {
    return async_;
  }

  // The unique id's store key, and the communicator (for tests and tools).
  static const char *const kUniqueIdKey;
  ncclComm_t comm() const
  {
    return comm_;
  }

  // Collectives (c10d's Backend API of PyTorch 2.x, ProcessGroup API of
  // 1.13). Every list of tensors holds one CPU tensor per rank-local
  // device, so exactly one here.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allreduce_coalesced(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                        const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allgather_coalesced(std::vector<std::vector<at::Tensor>> &output_lists,
                      std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                std::vector<std::vector<at::Tensor>> &inputs,
                                                const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                       const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                               std::vector<int64_t> &output_splits,
                                               std::vector<int64_t> &input_splits,
                                               const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

  // One all_gather_into_tensor / reduce_scatter_tensor per pair of
  // outputs[i] and inputs[i], run together as one ncclGroupStart/End
  // (torch.distributed._coalescing_manager calls them; PyTorch 2.x only).
  c10::intrusive_ptr<c10d::Work>
  allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::AllgatherOptions &opts) MESHCCL_OVERRIDE_2X;
  c10::intrusive_ptr<c10d::Work>
  reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::ReduceScatterOptions &opts) MESHCCL_OVERRIDE_2X;

  // torch.distributed.batch_isend_irecv and _coalescing_manager bracket
  // their operations with these: the operations issued in between run as one
  // ncclGroupStart/End, so that matching sends and receives in any order do
  // not wait for each other. PyTorch 2.x asks supportsCoalescing() first and
  // takes endCoalescing()'s Work, which completes with the whole batch;
  // 1.13 keeps the Works of the operations themselves.
  void startCoalescing() override;
#if MESHCCL_TORCH_BACKEND
  bool supportsCoalescing() const override
  {
    return true;
  }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  // destroy_process_group calls it (PyTorch 2.x): runs what is queued, then
  // frees the communicator; later operations fail. The destructor does the
  // same when it was not called.
  void shutdown() override;
#else
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>> &reqs) override;
#endif

private:
  // One unit of execution: NCCL calls made together (a group when there are
  // several), with host-side steps before (copy inputs into a flat buffer)
  // and after (copy a flat buffer out), and the works it completes.
  struct Job {
    std::string what;
    std::vector<std::function<void()>> before;
    std::vector<std::function<ncclResult_t(ncclComm_t)>> calls;
    std::vector<std::function<void()>> after;
    std::vector<c10::intrusive_ptr<WorkMeshccl>> works;
    std::chrono::milliseconds timeout{0};
  };

  // "meshccl: rank R of N: ", the start of every message.
  std::string who() const;
  void checkTensor(const at::Tensor &t, const char *call, const char *role) const;
  at::Tensor &single(std::vector<at::Tensor> &tensors, const char *call) const;
  void checkRank(int64_t r, const char *call, const char *role) const;
  void checkList(const std::vector<at::Tensor> &list, const at::Tensor &like, size_t n,
                 const char *call, const char *role) const;
  void addAllreduce(Job &job, const at::Tensor &t, const c10d::ReduceOp &op,
                    const char *call) const;
  void addAllgatherBase(Job &job, const at::Tensor &output, const at::Tensor &input,
                        const char *call) const;
  void addReduceScatterBase(Job &job, const at::Tensor &output, const at::Tensor &input,
                            const c10d::ReduceOp &op, const char *call) const;
  bool isCoalescing();
  // Closes the batch and submits it; its Work, completed at once when empty.
  c10::intrusive_ptr<c10d::Work> endBatch();

  c10::intrusive_ptr<WorkMeshccl> makeWork(c10d::OpType type, const char *title,
                                           std::vector<at::Tensor> outputs,
                                           const std::string &what);
  // Queues (async), runs (sync) or, while coalescing, adds to the batch.
  c10::intrusive_ptr<c10d::Work> submit(Job job, std::chrono::milliseconds op_timeout);
  void runJob(Job &job);
  void workerLoop();
  void watchdogLoop();
  std::string describeFailure(const std::string &what, ncclResult_t res, bool timed_out) const;
  // Stops the threads and frees the communicator, without holding the GIL.
  void stopReleasingGil();
  void stop();

  ncclComm_t comm_ = nullptr;
  std::string who_; // "meshccl: rank R of N (label): "
  std::chrono::milliseconds timeout_;
  bool async_;

  // Worker queue (async) and the lock that serialises runs (sync).
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread worker_;
  std::mutex run_mutex_;

  // Coalescing (batch_isend_irecv): the batch being built, per process group.
  std::mutex batch_mutex_;
  bool coalescing_ = false;
  Job batch_;
  std::chrono::milliseconds batch_timeout_{0};

  // Watchdog: the running job's deadline, and whether it fired.
  std::mutex watch_mutex_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;
  bool running_ = false;
  bool running_has_deadline_ = false;
  uint64_t running_seq_ = 0;
  std::chrono::steady_clock::time_point running_deadline_;
  std::string running_what_;
  bool timed_out_ = false;
  std::string failure_; // first failure: every later operation reports it
  std::thread watchdog_;
};

} // namespace meshccl_torch
