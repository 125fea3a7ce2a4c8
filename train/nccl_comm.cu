#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <vector>

#include "common/cuda_check.h"
#include "common/error.h"
#include "train/nccl_comm.h"

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void nccl_failed(ncclResult_t r, const char* what) {
  user_error("NCCL failed in ", what, ": ", ncclGetErrorString(r),
             " (NCCL_DEBUG=WARN tells more; check that every process was launched with the same world size).");
}
}  // namespace

void select_gpu(int local_rank) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || local_rank >= n)
    user_error("this process's local rank is ", local_rank, " but the machine shows ", n, n == 1 ? " GPU" : " GPUs",
               "; launch at most one process per GPU on each machine.");
  CUDA_CHECK(cudaSetDevice(local_rank));
}

NcclComm::NcclComm(const ProcessGroup& g, const std::string& id_file, double timeout_s)
    : rank_(g.rank), world_(g.world), timeout_s_(timeout_s) {
  ncclUniqueId id;
  if (rank_ == 0) {
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (world_ > 1) {
      if (id_file.empty()) user_error("several processes need an NCCL id file that all of them can read.");
      publish_unique_id(id_file, std::vector<char>(id.internal, id.internal + sizeof id.internal), g);
    }
  } else {
    const std::vector<char> got = wait_for_unique_id(id_file, sizeof id.internal, timeout_s > 0 ? timeout_s : 1e9, g);
    std::copy(got.begin(), got.end(), id.internal);
  }
  // Non-blocking: the join runs in NCCL's threads and this one polls it, so that a process that never
  // comes (it failed to start, or has another world size) ends the wait after timeout_s.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, world_, id, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) nccl_failed(r, "ncclCommInitRankConfig");
  try {
    wait_ready("joining the other processes");
  } catch (...) {
    if (rank_ == 0 && world_ > 1) std::remove(id_file.c_str());  // no process will read it now
    throw;
  }
  // Every process has joined, so every one has read the id: remove the file, so that a later run given
  // the same path cannot read this run's id.
  if (rank_ == 0 && world_ > 1) std::remove(id_file.c_str());
  last_beat_ns_ = now_ns();
  if (world_ > 1 && timeout_s_ > 0) watchdog_ = std::thread([this] { watch(); });
}

NcclComm::~NcclComm() {
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
  }
  if (!comm_) return;
  // No checks: nothing may throw from here. After a failure, or when an error unwinds past the
  // communicator, the other processes may never come to a collective again: abort rather than wait.
  // Otherwise finalize (flushes what is in flight; non-blocking, so polled) within the timeout.
  bool finished = !failed_ && std::uncaught_exceptions() == 0;
  if (finished) {
    ncclResult_t state = ncclCommFinalize(comm_);
    const int64_t start = now_ns();
    while (state == ncclInProgress && (timeout_s_ <= 0 || double(now_ns() - start) * 1e-9 < timeout_s_)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    }
    finished = state == ncclSuccess;
  }
  if (finished)
    ncclCommDestroy(comm_);
  else
    ncclCommAbort(comm_);
}

void NcclComm::check(ncclResult_t r, const char* what) {
  if (r == ncclInProgress) return wait_ready(what);
  if (r != ncclSuccess) {
    fail();
    nccl_failed(r, what);
  }
}

void NcclComm::wait_ready(const char* what) {
  const int64_t start = now_ns();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) state = q;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      fail();
      nccl_failed(state, what);
    }
    if (timeout_s_ > 0 && double(now_ns() - start) * 1e-9 > timeout_s_) {
      fail();
      user_error("rank ", rank_, ": NCCL was still ", what, " after ", timeout_s_,
                 " s (a process failed to start, died, or was launched with another world size); "
                 "--nccl-timeout sets this wait.");
    }
    // A launch is ready within microseconds, so spin; a join can take seconds, so after 20 ms sleep between
    // polls. (A 1 ms sleep after 1000 polls made each launch outside a CUDA graph take about 1.2 ms of host
    // time: bench_grad_sum's NCCL all-reduce of 28 MB, 1.15 -> 0.17 ms on 4 H100s.)
    if (now_ns() - start > 20000000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void NcclComm::fail() {
  failed_ = true;
  if (watchdog_.joinable()) return;  // it still reads comm_: the destructor stops it, then aborts
  ncclCommAbort(comm_);              // in the constructor, whose throw runs no destructor
  comm_ = nullptr;
}

void NcclComm::beat() { last_beat_ns_ = now_ns(); }

void NcclComm::set_local_work(bool on) {
  if (!on) beat();
  local_work_ = on;
}

void NcclComm::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return closing_; })) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
      give_up(std::string("NCCL reported an error: ") + ncclGetErrorString(state));
    const double idle = double(now_ns() - last_beat_ns_) * 1e-9;
    if (!local_work_ && idle > timeout_s_) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.0f", idle);
      give_up(std::string("no step has finished on every process for ") + secs +
              " s: another process died or hangs (--nccl-timeout sets this wait)");
    }
  }
}

// From the watchdog thread while the main thread may be stuck in a CUDA wait that only the abort ends:
// say why, abort the communicator (bounded: the process ends after 10 s even if the abort hangs), exit.
void NcclComm::give_up(const std::string& why) {
  std::fprintf(stderr,
               "rank %d: %s; stopping this process. The last checkpoint written is whole: resume from it with "
               "--resume.\n",
               rank_, why.c_str());
  std::atomic<bool> aborted{false};
  std::thread([this, &aborted] {
    ncclCommAbort(comm_);
    aborted = true;
  }).detach();
  for (int i = 0; i < 1000 && !aborted; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  _exit(4);  // no destructors: the main thread is blocked and owns everything
}

void NcclComm::sum(float* data, size_t n, cudaStream_t s) {
  check(ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::sum(double* data, size_t n, cudaStream_t s) {
  check(ncclAllReduce(data, data, n, ncclDouble, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::sum(uint64_t* data, size_t n, cudaStream_t s) {
  check(ncclAllReduce(data, data, n, ncclUint64, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::max(float* data, size_t n, cudaStream_t s) {
  check(ncclAllReduce(data, data, n, ncclFloat, ncclMax, comm_, s), "ncclAllReduce");
}

void NcclComm::sum(__nv_bfloat16* data, size_t n, cudaStream_t s) {
  check(ncclAllReduce(data, data, n, ncclBfloat16, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::reduce_sum(float* data, size_t n, int root, cudaStream_t s) {
  check(ncclReduce(data, data, n, ncclFloat, ncclSum, root, comm_, s), "ncclReduce");
}

void NcclComm::reduce_sum(__nv_bfloat16* data, size_t n, int root, cudaStream_t s) {
  check(ncclReduce(data, data, n, ncclBfloat16, ncclSum, root, comm_, s), "ncclReduce");
}

void NcclComm::all_gather(float* data, size_t n, cudaStream_t s) {
  check(ncclAllGather(data + size_t(rank_) * n, data, n, ncclFloat, comm_, s), "ncclAllGather");
}

void NcclComm::all_gather(__nv_bfloat16* data, size_t n, cudaStream_t s) {
  check(ncclAllGather(data + size_t(rank_) * n, data, n, ncclBfloat16, comm_, s), "ncclAllGather");
}

void NcclComm::all_gather_bytes(const void* mine, void* all, size_t bytes, cudaStream_t s) {
  check(ncclAllGather(mine, all, bytes, ncclUint8, comm_, s), "ncclAllGather");
}

void NcclComm::group_begin() { check(ncclGroupStart(), "ncclGroupStart"); }
void NcclComm::group_end() { check(ncclGroupEnd(), "ncclGroupEnd"); }
