// SPDX-License-Identifier: Apache-2.0
//
// ProcessGroupMeshccl (process_group_meshccl.hpp): c10d's collectives as
// meshccl calls on CPU tensors, a worker thread per process group, and a
// watchdog. Tensor checks and the mapping of dtypes and reduce ops follow
// ProcessGroupNCCL.cpp; the work queue follows ProcessGroupGloo.cpp. What
// differs between PyTorch 1.13 and 2.x is in torch_compat.hpp. See
// docs/PYTORCH.md.

// Python.h comes first, as Python's C API asks (the destructor releases the GIL).
#include <Python.h>

#include "process_group_meshccl.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <meshccl.h>

namespace meshccl_torch
{

const char *const ProcessGroupMeshccl::kUniqueIdKey = "meshccl/unique_id";

namespace
{

using Clock = std::chrono::steady_clock;

// The name NCCL gives a result code, for messages next to its description.
const char *resultName(ncclResult_t res)
{
  switch (res) {
  case ncclSuccess:
    return "ncclSuccess";
  case ncclUnhandledCudaError:
    return "ncclUnhandledCudaError";
  case ncclSystemError:
    return "ncclSystemError";
  case ncclInternalError:
    return "ncclInternalError";
  case ncclInvalidArgument:
    return "ncclInvalidArgument";
  case ncclInvalidUsage:
    return "ncclInvalidUsage";
  case ncclRemoteError:
    return "ncclRemoteError";
  case ncclInProgress:
    return "ncclInProgress";
  default:
    return "ncclResult";
  }
}

std::string shape(const at::Tensor &t)
{
  std::ostringstream s;
  s << t.numel() << " " << c10::toString(t.scalar_type()) << " elements";
  return s.str();
}

// What NCCL reduces: a pointer's element type and count. Complex tensors are
// reduced as pairs of reals (sum and average only), as ProcessGroupNCCL does
// with view_as_real; bool reduces as uint8 with NCCL's max and min.
struct RedType {
  ncclDataType_t type;
  size_t count;
};

RedType redType(const at::Tensor &t, c10d::ReduceOp::RedOpType op, const std::string &who,
                const char *call)
{
  at::ScalarType st = t.scalar_type();
  size_t count = static_cast<size_t>(t.numel());

  if (at::isComplexType(st)) {
    TORCH_CHECK((op == c10d::ReduceOp::SUM) || (op == c10d::ReduceOp::AVG) ||
                    (op == c10d::ReduceOp::PREMUL_SUM),
                who, call, ": complex tensors reduce with SUM or AVG only (as in NCCL)");
    st = c10::toRealValueType(st);
    count *= 2;
  }
  switch (st) {
  case at::kChar:
    return {ncclInt8, count};
  case at::kByte:
  case at::kBool:
    return {ncclUint8, count};
  case at::kInt:
    return {ncclInt32, count};
  case at::kLong:
    return {ncclInt64, count};
  case at::kHalf:
    return {ncclFloat16, count};
  case at::kBFloat16:
    return {ncclBfloat16, count};
  case at::kFloat:
    return {ncclFloat32, count};
  case at::kDouble:
    return {ncclFloat64, count};
  default:
    TORCH_CHECK(false, who, call, ": NCCL has no reduction for ", c10::toString(t.scalar_type()),
                " tensors (it reduces int8, uint8, int32, int64, float16, bfloat16, float32, "
                "float64, and bool as uint8); broadcasts, gathers and all-to-all move any dtype");
  }
}

const char *redOpName(c10d::ReduceOp::RedOpType op)
{
  switch (op) {
  case c10d::ReduceOp::BAND:
    return "BAND";
  case c10d::ReduceOp::BOR:
    return "BOR";
  case c10d::ReduceOp::BXOR:
    return "BXOR";
  default:
    return "UNUSED";
  }
}

// c10d's op as NCCL's (ProcessGroupNCCL.cpp's ncclOp table, its bool variant
// included); PREMUL_SUM becomes a sum of inputs scaled beforehand.
ncclRedOp_t ncclOp(c10d::ReduceOp::RedOpType op, at::ScalarType st, const std::string &who,
                   const char *call)
{
  bool is_bool = (st == at::kBool);

  switch (op) {
  case c10d::ReduceOp::SUM:
  case c10d::ReduceOp::PREMUL_SUM:
    return is_bool ? ncclMax : ncclSum;
  case c10d::ReduceOp::PRODUCT:
    return is_bool ? ncclMin : ncclProd;
  case c10d::ReduceOp::MIN:
    return ncclMin;
  case c10d::ReduceOp::MAX:
    return ncclMax;
  case c10d::ReduceOp::AVG:
    TORCH_CHECK(!is_bool, who, call, ": ReduceOp.AVG of bool tensors is not defined");
    return ncclAvg;
  default:
    TORCH_CHECK(false, who, call, ": ReduceOp.", redOpName(op),
                " is not an NCCL reduction (NCCL has SUM, PRODUCT, MIN, MAX, AVG, PREMUL_SUM); use "
                "the gloo backend for bitwise reductions");
  }
}

// PREMUL_SUM's factor (ProcessGroupNCCL.cpp reads the same supplement).
struct Premul {
  bool is_set = false;
  double factor = 1.0;
  at::Tensor tensor_factor;

  at::Tensor scaled(const at::Tensor &t) const
  {
    return tensor_factor.defined() ? t.mul(tensor_factor.to(t.scalar_type())) : t.mul(factor);
  }
};

Premul premulOf(const c10d::ReduceOp &op, const std::string &who, const char *call)
{
  Premul p;
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM)
    return p;
  auto *sup = dynamic_cast<c10d::NCCLPreMulSumSupplement *>(op.supplement_.get());
  TORCH_CHECK(sup != nullptr, who, call, ": ReduceOp.PREMUL_SUM without its factor");
  p.is_set = true;
  at::Tensor factor = premulTensorFactor(*sup);
  if (factor.defined()) {
    p.tensor_factor = factor.to(at::kCPU);
  } else {
    p.factor = sup->double_factor;
  }
  return p;
}

// Which store, and where: init errors name both ports a job uses (the
// store's, MASTER_PORT under torchrun and meshccl-run, and meshccl's
// bootstrap root's), so that a clash between them is visible.
std::string describeStore(const c10::intrusive_ptr<c10d::Store> &store)
{
  c10::intrusive_ptr<c10d::Store> s = store;
  for (int depth = 0; depth < 8; depth++) {
    auto *prefix = dynamic_cast<c10d::PrefixStore *>(s.get());
    if (prefix == nullptr) {
      break;
    }
    s = prefix->getUnderlyingStore();
  }
  if (auto *tcp = dynamic_cast<c10d::TCPStore *>(s.get())) {
    return "the c10d store is a TCPStore at " + tcp->getHost() + ":" +
           std::to_string(tcp->getPort()) + " (MASTER_ADDR:MASTER_PORT with env://)";
  }
  if (dynamic_cast<c10d::FileStore *>(s.get()) != nullptr) {
    return "the c10d store is a FileStore";
  }
  return "the c10d store is not a TCPStore";
}

bool commIdIsSet();

std::string describeRoot()
{
  const char *value = nullptr;
  int len = 0;
  if ((ncclParamGetParameter("NCCL_COMM_ID", &value, &len) == ncclSuccess) && (value != nullptr) &&
      (len > 0) && (value[0] != '\0')) {
    return "meshccl's bootstrap root is at NCCL_COMM_ID=" +
           std::string(value, strnlen(value, len)) + " (rank 0 listens there)";
  }
  return "meshccl's bootstrap root listens in rank 0's process at the address its "
         "ncclGetUniqueId chose (NCCL_COMM_ID is not set)";
}

bool commIdIsSet()
{
  const char *value = nullptr;
  int len = 0;
  return (ncclParamGetParameter("NCCL_COMM_ID", &value, &len) == ncclSuccess) &&
         (value != nullptr) && (len > 0) && (value[0] != '\0');
}

// Under NCCL_COMM_ID (meshccl-run sets it) ncclGetUniqueId returns the same
// id for every communicator, as NCCL's does: NCCL's fixed magic and that
// address, where rank 0 starts the root during init, one communicator after
// another. meshccl names a communicator's shared-memory segments after a hash
// of the whole id, so two process groups made from that one id would collide
// once both run. Rank 0 therefore writes a random nonce into the id's zero
// padding (docs/ARCHITECTURE.md, Bootstrap: magic, root address, nRanks, then
// padding to 128 bytes), which the bootstrap does not read and the hash does:
// each process group's communicator gets its own hash, as it would from a
// fresh id.
constexpr size_t kNonceOffset = 96;

// Whether the job has a secret (MESHCCL_SECRET, which meshccl-run sets).
// Then rank 0 puts only the published form of the id into the store
// (meshcclGetPublicUniqueId: magic, root address and a random nonce, no
// secret), and every rank derives the communicator's secret from
// MESHCCL_SECRET and the nonce (meshcclUniqueIdAddSecret): c10d's TCPStore
// admits anyone who knows MASTER_PORT, so a full id there would let a
// stranger join the process group. Without it the id goes as it is, as
// ProcessGroupNCCL's does (docs/PYTORCH.md).
bool jobHasSecret()
{
  const char *value = nullptr;
  int len = 0;
  return (ncclParamGetParameter("MESHCCL_SECRET", &value, &len) == ncclSuccess) &&
         (value != nullptr) && (len > 0) && (value[0] != '\0');
}

void addNonce(ncclUniqueId *id)
{
  std::random_device rd;
  for (size_t i = kNonceOffset; i + sizeof(uint32_t) <= sizeof(id->internal);
       i += sizeof(uint32_t)) {
    const uint32_t r = rd();
    std::memcpy(id->internal + i, &r, sizeof(r));
  }
}

} // namespace

// ---------------------------------------------------------------------------
// WorkMeshccl

WorkMeshccl::WorkMeshccl(int rank, c10d::OpType type, const char *profiling_title,
                         std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, profiling_title, outputs), outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get())))
{
}

bool WorkMeshccl::wait(std::chrono::milliseconds timeout)
{
  if (in_open_batch.load()) {
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    TORCH_CHECK(false, "meshccl: rank ", rank_, ": ", what, " did not complete within ",
                timeout.count(), " ms (the timeout given to wait())");
  }
  if (exception_) {
    std::rethrow_exception(exception_);
  }
  return true;
}

std::vector<at::Tensor> WorkMeshccl::result()
{
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkMeshccl::getFuture()
{
  return future_;
}

void WorkMeshccl::complete(std::exception_ptr error)
{
  // The future first: DistributedDataParallel chains work on it, and a
  // thread woken by finish() may drop the last reference to this work.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

// ---------------------------------------------------------------------------
// Construction: unique id through the store, non-blocking init with a deadline

ProcessGroupMeshccl::ProcessGroupMeshccl(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                         int size, std::chrono::milliseconds timeout, bool async,
                                         const std::string &label)
    : PgBase(rank, size), timeout_(timeout), async_(async)
{
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclResult_t res;
  const std::string who = "meshccl: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                          (label.empty() ? "" : " (" + label + ")");

  who_ = who + ": ";

  TORCH_CHECK((size >= 1) && (rank >= 0) && (rank < size), who, ": not a rank of the group");
  std::memset(&id, 0, sizeof(id));
  // ProcessGroupNCCL's broadcastUniqueNCCLID: rank 0 creates the id (and
  // the bootstrap root, in this process), the others read it from the store.
  if (rank == 0) {
    const bool published = jobHasSecret();
    const char *call = published ? "meshcclGetPublicUniqueId" : "ncclGetUniqueId";
    res = published ? meshcclGetPublicUniqueId(&id) : ncclGetUniqueId(&id);
    TORCH_CHECK(res == ncclSuccess, who, ": ", call, " failed: ", ncclGetErrorString(res), " (",
                resultName(res), "): ", ncclGetLastError(nullptr));
    if (!published && commIdIsSet()) {
      addNonce(&id);
    }
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t *>(id.internal),
                               reinterpret_cast<uint8_t *>(id.internal) + sizeof(id.internal));
    try {
      store->set(kUniqueIdKey, bytes);
    } catch (const std::exception &e) {
      TORCH_CHECK(false, who, ": cannot put the unique id into the c10d store (key '", kUniqueIdKey,
                  "'; ", describeStore(store), "): ", e.what());
    }
  } else {
    std::vector<uint8_t> bytes;
    try {
      bytes = store->get(kUniqueIdKey);
    } catch (const std::exception &e) {
      TORCH_CHECK(false, who, ": no unique id from rank 0 in the c10d store (key '", kUniqueIdKey,
                  "'; ", describeStore(store),
                  "): is rank 0 running and creating this process group with backend "
                  "\"meshccl\"? ",
                  e.what());
    }
    TORCH_CHECK(bytes.size() == sizeof(id.internal), who,
                ": the unique id in the c10d store (key '", kUniqueIdKey, "') has ", bytes.size(),
                " bytes, expected ", sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  // A published id gets its secret here, on every rank (rank 0 included);
  // any other id is left as it is.
  res = meshcclUniqueIdAddSecret(&id);
  TORCH_CHECK(res == ncclSuccess, who,
              ": meshcclUniqueIdAddSecret failed: ", ncclGetErrorString(res), " (", resultName(res),
              "): ", ncclGetLastError(nullptr));

  // Non-blocking init, so that the process group's timeout bounds it.
  config.blocking = 0;
  res = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  const auto deadline = Clock::now() + timeout;
  while (res == ncclInProgress) {
    ncclResult_t state = ncclInProgress;
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      TORCH_CHECK(false, who, ": communicator init did not finish within ", timeout.count(),
                  " ms (the process group's timeout): are all ", size,
                  " ranks creating this process group? (", describeRoot(), "; ",
                  describeStore(store), ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    res = ncclCommGetAsyncError(comm, &state);
    if (res == ncclSuccess) {
      res = state;
    }
  }
  if (res != ncclSuccess) {
    std::string last = ncclGetLastError(comm);
    if (comm != nullptr) {
      ncclCommAbort(comm);
    }
    TORCH_CHECK(false, who, ": communicator init failed: ", ncclGetErrorString(res), " (",
                resultName(res), "): ", last, " (", describeRoot(), "; ", describeStore(store),
                ")");
  }
  comm_ = comm;
  init();
  if (async_) {
    worker_ = std::thread(&ProcessGroupMeshccl::workerLoop, this);
  }
  watchdog_ = std::thread(&ProcessGroupMeshccl::watchdogLoop, this);
}

ProcessGroupMeshccl::~ProcessGroupMeshccl()
{
  stopReleasingGil();
}

#if MESHCCL_TORCH_BACKEND
void ProcessGroupMeshccl::shutdown()
{
  stopReleasingGil();
}
#endif

void ProcessGroupMeshccl::stopReleasingGil()
{
  // The worker may complete futures whose callbacks take the GIL (Python
  // comm hooks): never wait for it while holding the GIL.
  if (Py_IsInitialized() && !_Py_IsFinalizing() && PyGILState_Check()) {
    PyThreadState *state = PyEval_SaveThread();
    stop();
    PyEval_RestoreThread(state);
  } else {
    stop();
  }
}

// Runs what is queued, stops the threads, then frees the communicator:
// ncclCommDestroy when healthy, ncclCommAbort after a failure or a timeout.
// A second call finds nothing left to do.
void ProcessGroupMeshccl::stop()
{
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) {
    watchdog_.join();
  }
  // An operation on the calling thread (async = false) finishes first.
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  if (comm_ != nullptr) {
    ncclResult_t state = ncclSuccess;
    bool healthy = (ncclCommGetAsyncError(comm_, &state) == ncclSuccess) &&
                   (state == ncclSuccess) && failure_.empty();
    ncclResult_t res = healthy ? ncclCommDestroy(comm_) : ncclCommAbort(comm_);
    if (res != ncclSuccess) {
      std::fprintf(stderr, "meshccl: rank %d of %d: freeing the communicator failed: %s: %s\n",
                   rank_, size_, ncclGetErrorString(res), ncclGetLastError(nullptr));
    }
    comm_ = nullptr;
  }
}

// ---------------------------------------------------------------------------
// Execution

std::string ProcessGroupMeshccl::who() const
{
  return who_;
}

c10::intrusive_ptr<WorkMeshccl> ProcessGroupMeshccl::makeWork(c10d::OpType type, const char *title,
                                                              std::vector<at::Tensor> outputs,
                                                              const std::string &what)
{
  auto work = c10::make_intrusive<WorkMeshccl>(rank_, type, title, std::move(outputs));
  work->what = what;
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::submit(Job job,
                                                           std::chrono::milliseconds op_timeout)
{
  c10::intrusive_ptr<c10d::Work> first = job.works.front();

  job.timeout = (op_timeout == c10d::kUnsetTimeout) ? timeout_ : op_timeout;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    if (coalescing_) {
      if (!batch_.what.empty()) {
        batch_.what += ", ";
      }
      batch_.what += job.what;
      for (auto &f : job.before) {
        batch_.before.push_back(std::move(f));
      }
      for (auto &f : job.calls) {
        batch_.calls.push_back(std::move(f));
      }
      for (auto &f : job.after) {
        batch_.after.push_back(std::move(f));
      }
      for (auto &w : job.works) {
        w->in_open_batch.store(true);
        batch_.works.push_back(std::move(w));
      }
      batch_.timeout = std::max(batch_.timeout, job.timeout);
      return first;
    }
  }
  if (async_) {
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      TORCH_CHECK(!stopping_, who(), job.what,
                  " issued after the process group was shut down or while it is destroyed");
      queue_.push_back(std::move(job));
    }
    queue_cv_.notify_one();
  } else {
    std::lock_guard<std::mutex> lock(run_mutex_);
    TORCH_CHECK(comm_ != nullptr, who(), job.what, " issued after the process group was shut down");
    runJob(job);
  }
  return first;
}

bool ProcessGroupMeshccl::isCoalescing()
{
  std::lock_guard<std::mutex> lock(batch_mutex_);
  return coalescing_;
}

void ProcessGroupMeshccl::startCoalescing()
{
  std::lock_guard<std::mutex> lock(batch_mutex_);
  TORCH_CHECK(!coalescing_, who(), "startCoalescing while a batch is open (nested batches)");
  coalescing_ = true;
  batch_ = Job();
}

#if MESHCCL_TORCH_BACKEND
c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::endCoalescing()
{
  return endBatch();
}
#else
void ProcessGroupMeshccl::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>> & /*reqs*/)
{
  // The Works of the batch's operations complete with it.
  endBatch();
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::endBatch()
{
  Job job;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    TORCH_CHECK(coalescing_, who(), "endCoalescing without startCoalescing");
    coalescing_ = false;
    job = std::move(batch_);
    batch_ = Job();
  }
  std::vector<at::Tensor> outputs;
  for (auto &w : job.works) {
    w->in_open_batch.store(false);
    std::vector<at::Tensor> r = w->result();
    outputs.insert(outputs.end(), r.begin(), r.end());
  }
  const size_t n_ops = job.works.size();
  job.what = "batch of " + std::to_string(n_ops) + " operations (" + job.what + ")";
  c10::intrusive_ptr<WorkMeshccl> batch_work =
      makeWork(kCoalescedOpType, "meshccl:coalesced", outputs, job.what);
  if (n_ops == 0) {
    batch_work->complete(nullptr);
    return batch_work;
  }
  job.works.push_back(batch_work);
  std::chrono::milliseconds timeout = job.timeout;
  submit(std::move(job), timeout);
  return batch_work;
}

void ProcessGroupMeshccl::workerLoop()
{
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        return; // stopping, and everything queued has run
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    runJob(job);
  }
}

std::string ProcessGroupMeshccl::describeFailure(const std::string &what, ncclResult_t res,
                                                 bool timed_out) const
{
  std::ostringstream s;
  s << who() << what;
  if (timed_out) {
    s << " did not finish within the process group's timeout; the communicator was revoked and "
         "this process group cannot be used anymore (are the other ranks running the same "
         "operations in the same order?)";
  } else {
    s << " failed: " << ncclGetErrorString(res) << " (" << resultName(res) << ")";
  }
  const char *last = ncclGetLastError(comm_);
  if ((last != nullptr) && (last[0] != '\0')) {
    s << ": " << last;
  }
  return s.str();
}

void ProcessGroupMeshccl::runJob(Job &job)
{
  std::exception_ptr error;
  std::string message;

  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    if (!failure_.empty()) {
      message = who() + job.what + " not run: the process group failed earlier: " + failure_;
      error = std::make_exception_ptr(std::runtime_error(message));
    } else {
      ++running_seq_;
      running_ = true;
      running_has_deadline_ = (job.timeout.count() > 0);
      running_deadline_ = Clock::now() + job.timeout;
      running_what_ = job.what;
    }
  }
  watch_cv_.notify_all();
  if (!error) {
    bool comm_failed = false;
    try {
      for (auto &f : job.before) {
        f();
      }
      ncclResult_t res = ncclSuccess;
      if (job.calls.size() == 1) {
        res = job.calls[0](comm_);
      } else {
        res = ncclGroupStart();
        if (res == ncclSuccess) {
          // NCCL's rule: a group that was started is ended, even after a failed call.
          for (auto &call : job.calls) {
            ncclResult_t r = call(comm_);
            if ((r != ncclSuccess) && (res == ncclSuccess)) {
              res = r;
            }
          }
          ncclResult_t r = ncclGroupEnd();
          if (res == ncclSuccess) {
            res = r;
          }
        }
      }
      if (res != ncclSuccess) {
        ncclResult_t state = ncclSuccess;
        bool timed_out;
        {
          std::lock_guard<std::mutex> lock(watch_mutex_);
          timed_out = timed_out_;
        }
        comm_failed = timed_out || (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) ||
                      (state != ncclSuccess);
        throw std::runtime_error(describeFailure(job.what, res, timed_out));
      }
      for (auto &f : job.after) {
        f();
      }
    } catch (const std::exception &e) {
      message = e.what();
      error = std::current_exception();
    } catch (...) {
      message = who() + job.what + " failed: unknown exception";
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(watch_mutex_);
      running_ = false;
      if (comm_failed && failure_.empty()) {
        failure_ = message;
      }
    }
    watch_cv_.notify_all();
  }
  for (auto &w : job.works) {
    w->complete(error);
  }
}

void ProcessGroupMeshccl::watchdogLoop()
{
  std::unique_lock<std::mutex> lock(watch_mutex_);
  while (!watch_stop_) {
    if (!running_ || !running_has_deadline_) {
      watch_cv_.wait(lock);
      continue;
    }
    const uint64_t seq = running_seq_;
    const auto deadline = running_deadline_;
    auto moved_on = [&] { return watch_stop_ || !running_ || (running_seq_ != seq); };
    if (watch_cv_.wait_until(lock, deadline, moved_on)) {
      continue;
    }
    // The same operation is still running past its deadline.
    timed_out_ = true;
    std::string what = running_what_;
    lock.unlock();
    std::fprintf(stderr, "%s%s still running after its timeout: revoking the communicator\n",
                 who().c_str(), what.c_str());
    ncclResult_t res = ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
    if (res != ncclSuccess) {
      std::fprintf(stderr, "%sncclCommRevoke failed: %s: %s\n", who().c_str(),
                   ncclGetErrorString(res), ncclGetLastError(comm_));
    }
    lock.lock();
    watch_cv_.wait(lock, moved_on);
  }
}

// ---------------------------------------------------------------------------
// Argument checks (ProcessGroupNCCL.cpp's check_gpu_single_tensor, for CPU)

void ProcessGroupMeshccl::checkTensor(const at::Tensor &t, const char *call, const char *role) const
{
  TORCH_CHECK(t.defined(), who(), call, ": ", role, " is an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), who(), call, ": ", role, " is on ", t.device(),
              "; meshccl moves host memory: use CPU tensors (the nccl backend takes CUDA ones)");
  TORCH_CHECK(t.layout() == at::kStrided, who(), call, ": ", role,
              " is not a dense (strided) tensor");
  TORCH_CHECK(t.is_contiguous(), who(), call, ": ", role,
              " is not contiguous; pass tensor.contiguous()");
}

at::Tensor &ProcessGroupMeshccl::single(std::vector<at::Tensor> &tensors, const char *call) const
{
  TORCH_CHECK(tensors.size() == 1, who(), call,
              ": expects one tensor per call (one CPU device per rank), got ", tensors.size());
  checkTensor(tensors[0], call, "the tensor");
  return tensors[0];
}

void ProcessGroupMeshccl::checkRank(int64_t r, const char *call, const char *role) const
{
  TORCH_CHECK((r >= 0) && (r < size_), who(), call, ": ", role, " ", r,
              " is not a rank of this process group (0..", size_ - 1, ")");
}

// Every tensor of a list like `like`: same dtype and element count.
void ProcessGroupMeshccl::checkList(const std::vector<at::Tensor> &list, const at::Tensor &like,
                                    size_t n, const char *call, const char *role) const
{
  TORCH_CHECK(list.size() == n, who(), call, ": ", role, " has ", list.size(),
              " tensors, expected ", n);
  for (size_t i = 0; i < list.size(); i++) {
    const std::string name = std::string(role) + "[" + std::to_string(i) + "]";
    checkTensor(list[i], call, name.c_str());
    TORCH_CHECK(list[i].scalar_type() == like.scalar_type(), who(), call, ": ", name, " is ",
                c10::toString(list[i].scalar_type()), ", the input is ",
                c10::toString(like.scalar_type()));
    TORCH_CHECK(list[i].numel() == like.numel(), who(), call, ": ", name, " has ", list[i].numel(),
                " elements, the input has ", like.numel());
  }
}

// ---------------------------------------------------------------------------
// Collectives

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::broadcast(std::vector<at::Tensor> &tensors,
                                                              const c10d::BroadcastOptions &opts)
{
  at::Tensor t = single(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, who(), "broadcast: rootTensor ", opts.rootTensor,
              " given, there is one tensor per rank");
  checkRank(opts.rootRank, "broadcast", "root");
  const int root = static_cast<int>(opts.rootRank);
  Job job;
  job.what = "broadcast of " + shape(t) + " from rank " + std::to_string(root);
  job.calls.push_back([t, root](ncclComm_t c) {
    return ncclBroadcast(t.data_ptr(), t.data_ptr(), t.nbytes(), ncclUint8, root, c, nullptr);
  });
  job.works.push_back(makeWork(c10d::OpType::BROADCAST, "meshccl:broadcast", {t}, job.what));
  return submit(std::move(job), opts.timeout);
}

// All-reduce jobs of one tensor each: the call, and a scaled copy first for PREMUL_SUM.
void ProcessGroupMeshccl::addAllreduce(Job &job, const at::Tensor &t, const c10d::ReduceOp &op,
                                       const char *call) const
{
  RedType rt = redType(t, op.op_, who(), call);
  ncclRedOp_t nop = ncclOp(op.op_, t.scalar_type(), who(), call);
  Premul premul = premulOf(op, who(), call);
  if (premul.is_set) {
    job.before.push_back([t, premul]() mutable { t.copy_(premul.scaled(t)); });
  }
  job.calls.push_back([t, rt, nop](ncclComm_t c) {
    return ncclAllReduce(t.data_ptr(), t.data_ptr(), rt.count, rt.type, nop, c, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::allreduce(std::vector<at::Tensor> &tensors,
                                                              const c10d::AllreduceOptions &opts)
{
  at::Tensor t = single(tensors, "all_reduce");
  Job job;
  job.what = "all_reduce of " + shape(t);
  addAllreduce(job, t, opts.reduceOp, "all_reduce");
  job.works.push_back(makeWork(c10d::OpType::ALLREDUCE, "meshccl:all_reduce", {t}, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                         const c10d::AllreduceCoalescedOptions &opts)
{
  TORCH_CHECK(!tensors.empty(), who(), "all_reduce_coalesced: no tensors");
  Job job;
  job.what = "all_reduce_coalesced of " + std::to_string(tensors.size()) + " tensors";
  for (size_t i = 0; i < tensors.size(); i++) {
    const std::string role = "tensors[" + std::to_string(i) + "]";
    checkTensor(tensors[i], "all_reduce_coalesced", role.c_str());
    addAllreduce(job, tensors[i], opts.reduceOp, "all_reduce_coalesced");
  }
  job.works.push_back(makeWork(c10d::OpType::ALLREDUCE_COALESCED, "meshccl:all_reduce_coalesced",
                               tensors, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::reduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::ReduceOptions &opts)
{
  at::Tensor t = single(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, who(), "reduce: rootTensor ", opts.rootTensor,
              " given, there is one tensor per rank");
  checkRank(opts.rootRank, "reduce", "root");
  const int root = static_cast<int>(opts.rootRank);
  RedType rt = redType(t, opts.reduceOp.op_, who(), "reduce");
  ncclRedOp_t nop = ncclOp(opts.reduceOp.op_, t.scalar_type(), who(), "reduce");
  Premul premul = premulOf(opts.reduceOp, who(), "reduce");
  // PREMUL_SUM sends a scaled copy: a non-root's tensor stays as it was.
  auto send = std::make_shared<at::Tensor>(t);
  Job job;
  job.what = "reduce of " + shape(t) + " to rank " + std::to_string(root);
  if (premul.is_set) {
    job.before.push_back([t, send, premul] { *send = premul.scaled(t).contiguous(); });
  }
  job.calls.push_back([t, send, rt, nop, root](ncclComm_t c) {
    return ncclReduce(send->data_ptr(), t.data_ptr(), rt.count, rt.type, nop, root, c, nullptr);
  });
  job.works.push_back(makeWork(c10d::OpType::REDUCE, "meshccl:reduce", {t}, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                               std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
  at::Tensor in = single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1, who(), "all_gather: expects one output list, got ",
              outputs.size());
  std::vector<at::Tensor> outs = outputs[0];
  checkList(outs, in, static_cast<size_t>(size_), "all_gather", "output_tensor_list");
  // As ProcessGroupNCCL: gather into one flat buffer, then copy out.
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
  const int64_t n = in.numel();
  Job job;
  job.what = "all_gather of " + shape(in);
  job.calls.push_back([in, flat](ncclComm_t c) {
    return ncclAllGather(in.data_ptr(), flat.data_ptr(), in.nbytes(), ncclUint8, c, nullptr);
  });
  job.after.push_back([outs, flat, n]() mutable {
    for (size_t r = 0; r < outs.size(); r++) {
      outs[r].view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n));
    }
  });
  job.works.push_back(makeWork(c10d::OpType::ALLGATHER, "meshccl:all_gather", outs, job.what));
  return submit(std::move(job), opts.timeout);
}

// all_gather_into_tensor of one pair: the call, after the checks.
void ProcessGroupMeshccl::addAllgatherBase(Job &job, const at::Tensor &output,
                                           const at::Tensor &input, const char *call) const
{
  checkTensor(input, call, "the input");
  checkTensor(output, call, "the output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), who(), call, ": output is ",
              c10::toString(output.scalar_type()), ", input is ",
              c10::toString(input.scalar_type()));
  TORCH_CHECK(output.numel() == input.numel() * size_, who(), call, ": output has ", output.numel(),
              " elements, expected ", size_, " x ", input.numel());
  at::Tensor in = input;
  at::Tensor out = output;
  job.calls.push_back([in, out](ncclComm_t c) {
    return ncclAllGather(in.data_ptr(), out.data_ptr(), in.nbytes(), ncclUint8, c, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::_allgather_base(at::Tensor &output, at::Tensor &input,
                                     const c10d::AllgatherOptions &opts)
{
  Job job;
  addAllgatherBase(job, output, input, "_allgather_base");
  job.what = "all_gather_into_tensor of " + shape(input);
  job.works.push_back(
      makeWork(c10d::OpType::_ALLGATHER_BASE, "meshccl:_allgather_base", {output}, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                     std::vector<at::Tensor> &inputs,
                                                     const c10d::AllgatherOptions &opts)
{
  const char *call = "allgather_into_tensor_coalesced";
  TORCH_CHECK(!inputs.empty() && (outputs.size() == inputs.size()), who(), call, ": ",
              inputs.size(), " inputs and ", outputs.size(), " outputs, expected as many (not 0)");
  Job job;
  job.what = std::string(call) + " of " + std::to_string(inputs.size()) + " tensors";
  for (size_t i = 0; i < inputs.size(); i++) {
    addAllgatherBase(job, outputs[i], inputs[i], call);
  }
  job.works.push_back(makeWork(c10d::OpType::ALLGATHER_COALESCED,
                               "meshccl:allgather_into_tensor_coalesced", outputs, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::allgather_coalesced(std::vector<std::vector<at::Tensor>> &output_lists,
                                         std::vector<at::Tensor> &inputs,
                                         const c10d::AllgatherOptions &opts)
{
  // ProcessGroupGloo's layout: output_lists[rank][i] receives inputs[i] of rank.
  TORCH_CHECK(output_lists.size() == static_cast<size_t>(size_), who(),
              "all_gather_coalesced: ", output_lists.size(),
              " output lists, expected one per rank (", size_, ")");
  TORCH_CHECK(!inputs.empty(), who(), "all_gather_coalesced: no input tensors");
  Job job;
  std::vector<at::Tensor> all_outs;
  job.what = "all_gather_coalesced of " + std::to_string(inputs.size()) + " tensors";
  for (size_t r = 0; r < output_lists.size(); r++) {
    TORCH_CHECK(output_lists[r].size() == inputs.size(), who(),
                "all_gather_coalesced: output_lists[", r, "] has ", output_lists[r].size(),
                " tensors, there are ", inputs.size(), " inputs");
  }
  for (size_t i = 0; i < inputs.size(); i++) {
    const std::string role = "inputs[" + std::to_string(i) + "]";
    at::Tensor in = inputs[i];
    checkTensor(in, "all_gather_coalesced", role.c_str());
    std::vector<at::Tensor> outs;
    for (size_t r = 0; r < output_lists.size(); r++) {
      outs.push_back(output_lists[r][i]);
    }
    checkList(outs, in, static_cast<size_t>(size_), "all_gather_coalesced", "output_lists[*]");
    at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
    const int64_t n = in.numel();
    job.calls.push_back([in, flat](ncclComm_t c) {
      return ncclAllGather(in.data_ptr(), flat.data_ptr(), in.nbytes(), ncclUint8, c, nullptr);
    });
    job.after.push_back([outs, flat, n]() mutable {
      for (size_t r = 0; r < outs.size(); r++) {
        outs[r].view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n));
      }
    });
    all_outs.insert(all_outs.end(), outs.begin(), outs.end());
  }
  job.works.push_back(makeWork(c10d::OpType::ALLGATHER_COALESCED, "meshccl:all_gather_coalesced",
                               all_outs, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::gather(std::vector<std::vector<at::Tensor>> &outputs,
                            std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
  at::Tensor in = single(inputs, "gather");
  checkRank(opts.rootRank, "gather", "root");
  const int root = static_cast<int>(opts.rootRank);
  const int64_t n = in.numel();
  std::vector<at::Tensor> outs;
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1, who(), "gather: the root expects one output list, got ",
                outputs.size());
    outs = outputs[0];
    checkList(outs, in, static_cast<size_t>(size_), "gather", "gather_list");
    flat = at::empty({static_cast<int64_t>(size_) * n}, in.options());
  } else {
    TORCH_CHECK(outputs.empty() || ((outputs.size() == 1) && outputs[0].empty()), who(),
                "gather: only the root (rank ", root, ") takes a gather_list");
  }
  Job job;
  job.what = "gather of " + shape(in) + " to rank " + std::to_string(root);
  job.calls.push_back([in, flat, root](ncclComm_t c) {
    void *recv = flat.defined() ? flat.data_ptr() : nullptr;
    return ncclGather(in.data_ptr(), recv, in.nbytes(), ncclUint8, root, c, nullptr);
  });
  if (flat.defined()) {
    job.after.push_back([outs, flat, n]() mutable {
      for (size_t r = 0; r < outs.size(); r++) {
        outs[r].view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n));
      }
    });
  }
  job.works.push_back(makeWork(c10d::OpType::GATHER, "meshccl:gather", outs, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::scatter(std::vector<at::Tensor> &outputs,
                             std::vector<std::vector<at::Tensor>> &inputs,
                             const c10d::ScatterOptions &opts)
{
  at::Tensor out = single(outputs, "scatter");
  checkRank(opts.rootRank, "scatter", "root");
  const int root = static_cast<int>(opts.rootRank);
  const int64_t n = out.numel();
  std::vector<at::Tensor> ins;
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, who(), "scatter: the root expects one input list, got ",
                inputs.size());
    ins = inputs[0];
    checkList(ins, out, static_cast<size_t>(size_), "scatter", "scatter_list");
    flat = at::empty({static_cast<int64_t>(size_) * n}, out.options());
  } else {
    TORCH_CHECK(inputs.empty() || ((inputs.size() == 1) && inputs[0].empty()), who(),
                "scatter: only the root (rank ", root, ") takes a scatter_list");
  }
  Job job;
  job.what = "scatter of " + shape(out) + " from rank " + std::to_string(root);
  if (flat.defined()) {
    job.before.push_back([ins, flat, n]() mutable {
      for (size_t r = 0; r < ins.size(); r++) {
        flat.narrow(0, static_cast<int64_t>(r) * n, n).copy_(ins[r].view({-1}));
      }
    });
  }
  job.calls.push_back([out, flat, root](ncclComm_t c) {
    const void *send = flat.defined() ? flat.data_ptr() : nullptr;
    return ncclScatter(send, out.data_ptr(), out.nbytes(), ncclUint8, root, c, nullptr);
  });
  job.works.push_back(makeWork(c10d::OpType::SCATTER, "meshccl:scatter", {out}, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::reduce_scatter(std::vector<at::Tensor> &outputs,
                                    std::vector<std::vector<at::Tensor>> &inputs,
                                    const c10d::ReduceScatterOptions &opts)
{
  at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, who(), "reduce_scatter: expects one input list, got ",
              inputs.size());
  std::vector<at::Tensor> ins = inputs[0];
  checkList(ins, out, static_cast<size_t>(size_), "reduce_scatter", "input_list");
  RedType rt = redType(out, opts.reduceOp.op_, who(), "reduce_scatter");
  ncclRedOp_t nop = ncclOp(opts.reduceOp.op_, out.scalar_type(), who(), "reduce_scatter");
  Premul premul = premulOf(opts.reduceOp, who(), "reduce_scatter");
  const int64_t n = out.numel();
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * n}, out.options());
  Job job;
  job.what = "reduce_scatter of " + shape(out);
  job.before.push_back([ins, flat, n, premul]() mutable {
    for (size_t r = 0; r < ins.size(); r++) {
      flat.narrow(0, static_cast<int64_t>(r) * n, n).copy_(ins[r].view({-1}));
    }
    if (premul.is_set) {
      flat.copy_(premul.scaled(flat));
    }
  });
  job.calls.push_back([out, flat, rt, nop](ncclComm_t c) {
    return ncclReduceScatter(flat.data_ptr(), out.data_ptr(), rt.count, rt.type, nop, c, nullptr);
  });
  job.works.push_back(
      makeWork(c10d::OpType::REDUCE_SCATTER, "meshccl:reduce_scatter", {out}, job.what));
  return submit(std::move(job), opts.timeout);
}

// reduce_scatter_tensor of one pair: the call (PREMUL_SUM scales a copy of
// the input, which stays as it was), after the checks.
void ProcessGroupMeshccl::addReduceScatterBase(Job &job, const at::Tensor &output,
                                               const at::Tensor &input, const c10d::ReduceOp &op,
                                               const char *call) const
{
  checkTensor(input, call, "the input");
  checkTensor(output, call, "the output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), who(), call, ": output is ",
              c10::toString(output.scalar_type()), ", input is ",
              c10::toString(input.scalar_type()));
  TORCH_CHECK(input.numel() == output.numel() * size_, who(), call, ": input has ", input.numel(),
              " elements, expected ", size_, " x ", output.numel());
  at::Tensor in = input;
  at::Tensor out = output;
  RedType rt = redType(out, op.op_, who(), call);
  ncclRedOp_t nop = ncclOp(op.op_, out.scalar_type(), who(), call);
  Premul premul = premulOf(op, who(), call);
  auto send = std::make_shared<at::Tensor>(in);
  if (premul.is_set) {
    job.before.push_back([in, send, premul] { *send = premul.scaled(in).contiguous(); });
  }
  job.calls.push_back([in, send, out, rt, nop](ncclComm_t c) {
    return ncclReduceScatter(send->data_ptr(), out.data_ptr(), rt.count, rt.type, nop, c, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                          const c10d::ReduceScatterOptions &opts)
{
  Job job;
  addReduceScatterBase(job, output, input, opts.reduceOp, "_reduce_scatter_base");
  job.what = "reduce_scatter_tensor of " + shape(output);
  job.works.push_back(makeWork(c10d::OpType::_REDUCE_SCATTER_BASE, "meshccl:_reduce_scatter_base",
                               {output}, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMeshccl::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                     std::vector<at::Tensor> &inputs,
                                                     const c10d::ReduceScatterOptions &opts)
{
  const char *call = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(!inputs.empty() && (outputs.size() == inputs.size()), who(), call, ": ",
              inputs.size(), " inputs and ", outputs.size(), " outputs, expected as many (not 0)");
  Job job;
  job.what = std::string(call) + " of " + std::to_string(inputs.size()) + " tensors";
  for (size_t i = 0; i < inputs.size(); i++) {
    addReduceScatterBase(job, outputs[i], inputs[i], opts.reduceOp, call);
  }
  job.works.push_back(makeWork(c10d::OpType::REDUCE_SCATTER,
                               "meshccl:reduce_scatter_tensor_coalesced", outputs, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::alltoall_base(
    at::Tensor &output, at::Tensor &input, std::vector<int64_t> &output_splits,
    std::vector<int64_t> &input_splits, const c10d::AllToAllOptions &opts)
{
  checkTensor(input, "all_to_all_single", "the input");
  checkTensor(output, "all_to_all_single", "the output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), who(), "all_to_all_single: output is ",
              c10::toString(output.scalar_type()), ", input is ",
              c10::toString(input.scalar_type()));
  at::Tensor in = input;
  at::Tensor out = output;
  Job job;
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK((in.numel() == out.numel()) && (in.numel() % size_ == 0), who(),
                "all_to_all_single: input and output need the same number of elements, a "
                "multiple of the group size ",
                size_, " (input ", in.numel(), ", output ", out.numel(), ")");
    const size_t block = in.nbytes() / static_cast<size_t>(size_);
    job.what = "all_to_all_single of " + shape(in);
    auto send = std::make_shared<at::Tensor>(in);
    if (in.data_ptr() == out.data_ptr()) {
      // ncclAlltoAll has no in-place form: send from a copy.
      job.before.push_back([in, send] { *send = in.clone(); });
    }
    job.calls.push_back([send, out, block](ncclComm_t c) {
      return ncclAlltoAll(send->data_ptr(), out.data_ptr(), block, ncclUint8, c, nullptr);
    });
  } else {
    // Uneven splits: grouped send/recv, as ProcessGroupNCCL does with
    // ncclSend/ncclRecv per peer. Splits count rows of dimension 0.
    auto splitsOf = [&](std::vector<int64_t> &splits, const at::Tensor &t, const char *role) {
      std::vector<size_t> bytes(static_cast<size_t>(size_));
      const int64_t rows = (t.dim() > 0) ? t.size(0) : 1;
      const size_t row_bytes = (rows > 0) ? t.nbytes() / static_cast<size_t>(rows) : 0;
      if (splits.empty()) {
        TORCH_CHECK(rows % size_ == 0, who(), "all_to_all_single: ", role, " has ", rows,
                    " rows, not a multiple of the group size ", size_, " and no split sizes");
        std::fill(bytes.begin(), bytes.end(), static_cast<size_t>(rows / size_) * row_bytes);
        return bytes;
      }
      TORCH_CHECK(splits.size() == static_cast<size_t>(size_), who(), "all_to_all_single: ", role,
                  " split sizes has ", splits.size(), " entries, expected ", size_);
      int64_t sum = 0;
      for (size_t p = 0; p < splits.size(); p++) {
        TORCH_CHECK(splits[p] >= 0, who(), "all_to_all_single: negative ", role, " split size");
        sum += splits[p];
        bytes[p] = static_cast<size_t>(splits[p]) * row_bytes;
      }
      TORCH_CHECK(sum == rows, who(), "all_to_all_single: ", role, " split sizes add up to ", sum,
                  ", the tensor has ", rows, " rows");
      return bytes;
    };
    const std::vector<size_t> send_bytes = splitsOf(input_splits, in, "input");
    const std::vector<size_t> recv_bytes = splitsOf(output_splits, out, "output");
    job.what = "all_to_all_single (uneven splits) of " + shape(in);
    auto send = std::make_shared<at::Tensor>(in);
    if (in.data_ptr() == out.data_ptr()) {
      job.before.push_back([in, send] { *send = in.clone(); });
    }
    size_t send_off = 0;
    size_t recv_off = 0;
    for (int p = 0; p < size_; p++) {
      const size_t sb = send_bytes[static_cast<size_t>(p)];
      const size_t rb = recv_bytes[static_cast<size_t>(p)];
      job.calls.push_back([send, send_off, sb, p](ncclComm_t c) {
        return ncclSend(static_cast<const char *>(send->data_ptr()) + send_off, sb, ncclUint8, p, c,
                        nullptr);
      });
      job.calls.push_back([out, recv_off, rb, p](ncclComm_t c) {
        return ncclRecv(static_cast<char *>(out.data_ptr()) + recv_off, rb, ncclUint8, p, c,
                        nullptr);
      });
      send_off += sb;
      recv_off += rb;
    }
  }
  job.works.push_back(
      makeWork(c10d::OpType::ALLTOALL_BASE, "meshccl:all_to_all_single", {out}, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::alltoall(std::vector<at::Tensor> &outputs,
                                                             std::vector<at::Tensor> &inputs,
                                                             const c10d::AllToAllOptions &opts)
{
  TORCH_CHECK((outputs.size() == static_cast<size_t>(size_)) &&
                  (inputs.size() == static_cast<size_t>(size_)),
              who(), "all_to_all: expects one input and one output tensor per rank (", size_,
              "), got ", inputs.size(), " and ", outputs.size());
  Job job;
  job.what = "all_to_all of " + std::to_string(size_) + " tensors";
  for (int p = 0; p < size_; p++) {
    const std::string in_role = "input_tensor_list[" + std::to_string(p) + "]";
    const std::string out_role = "output_tensor_list[" + std::to_string(p) + "]";
    at::Tensor in = inputs[static_cast<size_t>(p)];
    at::Tensor out = outputs[static_cast<size_t>(p)];
    checkTensor(in, "all_to_all", in_role.c_str());
    checkTensor(out, "all_to_all", out_role.c_str());
    TORCH_CHECK(in.scalar_type() == out.scalar_type(), who(), "all_to_all: ", in_role, " is ",
                c10::toString(in.scalar_type()), ", ", out_role, " is ",
                c10::toString(out.scalar_type()));
    job.calls.push_back([in, p](ncclComm_t c) {
      return ncclSend(in.data_ptr(), in.nbytes(), ncclUint8, p, c, nullptr);
    });
    job.calls.push_back([out, p](ncclComm_t c) {
      return ncclRecv(out.data_ptr(), out.nbytes(), ncclUint8, p, c, nullptr);
    });
  }
  job.works.push_back(makeWork(c10d::OpType::ALLTOALL, "meshccl:all_to_all", outputs, job.what));
  return submit(std::move(job), opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::send(std::vector<at::Tensor> &tensors,
                                                         int dst_rank, int /*tag*/)
{
  // Tags are not matched: sends and receives between two ranks pair in call
  // order, as in NCCL (ProcessGroupNCCL ignores the tag too).
  at::Tensor t = single(tensors, "send");
  checkRank(dst_rank, "send", "destination");
  TORCH_CHECK((dst_rank != rank_) || isCoalescing(), who(),
              "send to itself outside batch_isend_irecv would wait forever");
  Job job;
  job.what = "send of " + shape(t) + " to rank " + std::to_string(dst_rank);
  job.calls.push_back([t, dst_rank](ncclComm_t c) {
    return ncclSend(t.data_ptr(), t.nbytes(), ncclUint8, dst_rank, c, nullptr);
  });
  job.works.push_back(makeWork(c10d::OpType::SEND, "meshccl:send", {t}, job.what));
  return submit(std::move(job), c10d::kUnsetTimeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::recv(std::vector<at::Tensor> &tensors,
                                                         int src_rank, int /*tag*/)
{
  at::Tensor t = single(tensors, "recv");
  checkRank(src_rank, "recv", "source");
  TORCH_CHECK((src_rank != rank_) || isCoalescing(), who(),
              "recv from itself outside batch_isend_irecv would wait forever");
  Job job;
  job.what = "recv of " + shape(t) + " from rank " + std::to_string(src_rank);
  job.calls.push_back([t, src_rank](ncclComm_t c) {
    return ncclRecv(t.data_ptr(), t.nbytes(), ncclUint8, src_rank, c, nullptr);
  });
  job.works.push_back(makeWork(c10d::OpType::RECV, "meshccl:recv", {t}, job.what));
  return submit(std::move(job), c10d::kUnsetTimeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMeshccl::barrier(const c10d::BarrierOptions &opts)
{
  // ProcessGroupNCCL's barrier: an all-reduce of one element. Queued behind
  // every earlier operation, so it also waits for them.
  at::Tensor t = at::zeros({1}, at::TensorOptions().dtype(at::kByte));
  Job job;
  job.what = "barrier";
  job.calls.push_back([t](ncclComm_t c) {
    return ncclAllReduce(t.data_ptr(), t.data_ptr(), 1, ncclUint8, ncclSum, c, nullptr);
  });
  job.works.push_back(makeWork(c10d::OpType::BARRIER, "meshccl:barrier", {}, job.what));
  return submit(std::move(job), opts.timeout);
}

} // namespace meshccl_torch
